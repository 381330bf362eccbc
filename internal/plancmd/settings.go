package plancmd

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/features"
	"github.com/afterhooks/helm-controller/internal/preview"
	"github.com/afterhooks/helm-controller/internal/runner"
)

// Where the controller runs when no flag says otherwise: Flux installs
// helm-controller as the Deployment flux-system/helm-controller, and the
// controller itself reads RUNTIME_NAMESPACE for its own namespace.
const (
	runtimeNamespaceEnv        = "RUNTIME_NAMESPACE"
	defaultControllerNamespace = "flux-system"
	defaultControllerName      = "helm-controller"
	// managerContainer is the container of the controller in Flux's
	// manifests.
	managerContainer = "manager"
)

// Origins of a setting, as the output names them.
const (
	fromDefault = "default"
	fromFlag    = "plan flag"
)

// settingsFlags are the plan's flags that stand for the controller's:
// which controller to read, and settings that win over what it runs with.
type settingsFlags struct {
	controllerNamespace string
	controllerName      string
	featureGates        map[string]bool
	overrideManagers    []string
	defaultSA           string
	// The flags given; a flag left out does not override.
	gatesSet, overrideSet, hookOrderSet, defaultSASet bool
}

// bindSettingsFlags registers the flags of s on fs.
func bindSettingsFlags(fs *pflag.FlagSet, s *settingsFlags) {
	fs.StringVar(&s.controllerNamespace, "controller-namespace", "",
		"the namespace of the controller's Deployment, whose settings the plan predicts with (default: RUNTIME_NAMESPACE, else flux-system)")
	fs.StringVar(&s.controllerName, "controller-name", defaultControllerName, "the name of the controller's Deployment")
	fs.Var(features.GatesValue(&s.featureGates), "feature-gates",
		"feature gates as the controller's flag takes them (Gate=true,...); they win over the Deployment's")
	fs.StringArrayVar(&s.overrideManagers, "override-manager", nil,
		"the controller's --override-manager (repeatable); wins over the Deployment's")
	fs.StringVar(&s.defaultSA, "default-service-account", "",
		"the controller's --default-service-account: the account a release without spec.serviceAccountName is planned as; wins over the Deployment's")
}

// noteChanged records which of the settings flags were given.
func (s *settingsFlags) noteChanged(fs *pflag.FlagSet) {
	s.gatesSet = fs.Changed("feature-gates")
	s.overrideSet = fs.Changed("override-manager")
	s.hookOrderSet = fs.Changed("default-wait-strategy")
	s.defaultSASet = fs.Changed("default-service-account")
}

// controllerKey is the Deployment to read the settings of.
func (s *settingsFlags) controllerKey() types.NamespacedName {
	ns := s.controllerNamespace
	if ns == "" {
		ns = os.Getenv(runtimeNamespaceEnv)
	}
	if ns == "" {
		ns = defaultControllerNamespace
	}
	return types.NamespacedName{Namespace: ns, Name: s.controllerName}
}

// controllerArgs are the settings read from the controller's command line.
type controllerArgs struct {
	gates            map[string]bool
	overrideManagers []string
	overrideSet      bool
	defaultSA        string
}

// parseControllerArgs reads args as the controller's flag set would,
// keeping the flags that change a prediction. The controller has many
// others (addresses, intervals, logging): those are skipped, not refused.
func parseControllerArgs(args []string) (controllerArgs, error) {
	var a controllerArgs
	fs := pflag.NewFlagSet("helm-controller", pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.Usage = func() {}
	fs.Var(features.GatesValue(&a.gates), "feature-gates", "")
	fs.StringArrayVar(&a.overrideManagers, "override-manager", nil, "")
	fs.StringVar(&a.defaultSA, "default-service-account", "", "")
	if err := fs.Parse(args); err != nil {
		return controllerArgs{}, err
	}
	a.overrideSet = fs.Changed("override-manager")
	return a, nil
}

// readController reads the command line of the controller's Deployment,
// or says, in note, why it could not: the plan then goes on with the
// defaults and its own flags, and prints the note.
func readController(ctx context.Context, c client.Reader, key types.NamespacedName) (args []string, note string) {
	d := &appsv1.Deployment{}
	err := c.Get(ctx, key, d)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("Deployment %s not found", key)
	case apierrors.IsForbidden(err):
		return nil, fmt.Sprintf("reading Deployment %s is forbidden: %s", key, oneLine(err.Error()))
	case err != nil:
		return nil, fmt.Sprintf("reading Deployment %s: %s", key, oneLine(err.Error()))
	}
	ctr := controllerContainer(d.Spec.Template.Spec.Containers)
	if ctr == nil {
		return nil, fmt.Sprintf("Deployment %s has no container %q and more than one container", key, managerContainer)
	}
	// A flag may sit in command as well as in args: Kubernetes runs them
	// as one command line. The binary's path is a positional argument,
	// which the flag parser leaves alone.
	return append(slices.Clone(ctr.Command), ctr.Args...), ""
}

// controllerContainer is the container named as in Flux's manifests, else
// the only one.
func controllerContainer(ctrs []corev1.Container) *corev1.Container {
	for i := range ctrs {
		if ctrs[i].Name == managerContainer {
			return &ctrs[i]
		}
	}
	if len(ctrs) == 1 {
		return &ctrs[0]
	}
	return nil
}

// settings are the controller settings a plan predicts with, and where
// each came from.
type settings struct {
	controller       types.NamespacedName
	gates            map[string]bool
	gateFrom         map[string]string
	hookOrder        v2.HookWaitStrategy
	hookOrderFrom    string
	overrideManagers []string
	overrideFrom     string
	defaultSA        string
	defaultSAFrom    string
	notes            []string
}

// controllerSettings reads the controller's Deployment and lays the plan's
// flags over what it finds. Anything the Deployment holds that cannot be
// used is a note, never an error: the plan still predicts, with the
// defaults, and says so. A bad --feature-gates on the plan is an error.
func controllerSettings(ctx context.Context, c client.Reader, o *options) (*settings, error) {
	key := o.settings.controllerKey()
	args, note := readController(ctx, c, key)
	var found controllerArgs
	if note == "" {
		var err error
		if found, err = parseControllerArgs(args); err != nil {
			note = fmt.Sprintf("the arguments of Deployment %s cannot be read: %s", key, oneLine(err.Error()))
		} else if _, err := features.Resolve(found.gates); err != nil {
			note = fmt.Sprintf("the --feature-gates of Deployment %s are not this controller's: %s", key, err)
			found = controllerArgs{}
		}
	}
	return resolveSettings(key, found, note, o)
}

// resolveSettings lays, for each setting, the plan's flag over the
// Deployment's (found, read from key) over the default. note, when set,
// says why nothing was read from the Deployment.
func resolveSettings(key types.NamespacedName, found controllerArgs, note string, o *options) (*settings, error) {
	flags := &o.settings
	deployment := "Deployment " + key.String()
	s := &settings{controller: key, gateFrom: map[string]string{}}
	if note != "" {
		s.notes = append(s.notes, note+"; the plan predicts with the defaults, and its own flags, in place of the controller's settings")
	}
	cli := map[string]bool{}
	for gate, on := range found.gates {
		cli[gate], s.gateFrom[gate] = on, deployment
	}
	for gate, on := range flags.featureGates {
		cli[gate], s.gateFrom[gate] = on, fromFlag+" --feature-gates"
	}
	gates, err := features.Resolve(cli)
	if err != nil {
		return nil, fmt.Errorf("--feature-gates: %w", err)
	}
	s.gates = gates
	for gate := range gates {
		if s.gateFrom[gate] == "" {
			s.gateFrom[gate] = fromDefault
		}
	}

	s.hookOrder, s.hookOrderFrom = v2.BeforeHooks, "DefaultToAfterHooks gate: "+s.gateFrom[features.DefaultToAfterHooks]
	if gates[features.DefaultToAfterHooks] {
		s.hookOrder = v2.AfterHooks
	}
	if flags.hookOrderSet {
		s.hookOrder, s.hookOrderFrom = v2.HookWaitStrategy(o.hookOrder), fromFlag+" --default-wait-strategy"
	}

	s.overrideFrom = fromDefault
	switch {
	case flags.overrideSet:
		s.overrideManagers, s.overrideFrom = flags.overrideManagers, fromFlag+" --override-manager"
	case found.overrideSet:
		s.overrideManagers, s.overrideFrom = found.overrideManagers, deployment
	}
	s.defaultSA, s.defaultSAFrom = resolveDefaultSA(flags, found, deployment)
	return s, nil
}

// resolveDefaultSA is the controller's --default-service-account, which
// decides as whom a release without spec.serviceAccountName is planned.
func resolveDefaultSA(flags *settingsFlags, found controllerArgs, deployment string) (string, string) {
	switch {
	case flags.defaultSASet:
		return flags.defaultSA, fromFlag + " --default-service-account"
	case found.defaultSA != "":
		return found.defaultSA, deployment
	}
	return "", fromDefault
}

// enabled reports a gate's state, as features.Enabled does in the
// controller.
func (s *settings) enabled(gate string) bool { return s.gates[gate] }

// runner are the runner's settings of the controller these settings
// describe (main.go newReconciler builds the controller's the same way).
func (s *settings) runner() runner.Settings {
	return runner.Settings{
		Config:           action.ConfigOf(s.enabled),
		DefaultHookOrder: s.hookOrder,
		OverrideManagers: s.overrideManagers,
	}
}

// predictionGates are the gates a plan's prediction depends on: the
// state machine's default strategy, and the action Config (action.ConfigOf).
// DefaultToAfterHooks shows as the default wait strategy it decides.
var predictionGates = []string{
	features.DefaultToRetryOnFailure,
	features.RecreateImmutableResources,
	features.UseHelm3Defaults,
	features.AllowDNSLookups,
}

// show is what the output says of the settings.
func (s *settings) show() *preview.Settings {
	out := &preview.Settings{Controller: s.controller.String(), FeatureGates: s.gates, Notes: s.notes}
	for _, gate := range predictionGates {
		out.Used = append(out.Used, preview.Setting{Name: gate, Value: strconv.FormatBool(s.gates[gate]), From: s.gateFrom[gate]})
	}
	out.Used = append(out.Used, preview.Setting{Name: "default wait strategy", Value: string(s.hookOrder), From: s.hookOrderFrom})
	managers := "none"
	if len(s.overrideManagers) > 0 {
		managers = strings.Join(s.overrideManagers, ",")
	}
	out.Used = append(out.Used, preview.Setting{Name: "override managers", Value: managers, From: s.overrideFrom})
	account := "none"
	if s.defaultSA != "" {
		account = s.defaultSA
	}
	out.Used = append(out.Used, preview.Setting{Name: "default service account", Value: account, From: s.defaultSAFrom})
	return out
}
