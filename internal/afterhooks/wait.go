package afterhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/runtime/patch"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes"

	"github.com/afterhooks/helm-controller/internal/kubewait"
)

// diagnoseTimeout bounds the look at live objects after a failed wait.
const diagnoseTimeout = 30 * time.Second

// WaitOption configures WaitReady.
type WaitOption func(*waitOptions)

type waitOptions struct {
	readers   []engine.StatusReader
	clientSet kubernetes.Interface
	// fetch reads the live object of a resource; tests replace it.
	fetch func(ctx context.Context, info *resource.Info) (*unstructured.Unstructured, error)
}

// WithStatusReaders adds kstatus status readers to the status watcher
// strategy (Helm's kube.WithKStatusReaders); readers come first, so they
// override the built-in ones for the kinds they support. This is the hook
// for spec.healthCheckExprs: CEL expressions turned into status readers.
// Helm's legacy strategy ignores them.
func WithStatusReaders(readers ...engine.StatusReader) WaitOption {
	return func(o *waitOptions) { o.readers = append(o.readers, readers...) }
}

// ResourceStatus is the state of one resource that is not ready: Kind,
// Namespace (empty for cluster-scoped resources) and Name, its kstatus
// Status (InProgress, Failed, NotFound, Unknown, or Current for a resource
// only Helm's legacy checks find not ready) and the Message explaining it.
type ResourceStatus = kubewait.NotReady

// NotReadyError is WaitReady's error when the resources did not become
// ready. It wraps Helm's waiter error.
type NotReadyError struct {
	// Timeout the wait was given.
	Timeout time.Duration
	// Resources that are not ready, sorted by kind, namespace and name.
	// Empty when they could not be identified.
	Resources []ResourceStatus
	// Err is the waiter's error.
	Err error
	// Notes say where the wait ran, and what the waiter itself noted (gone
	// Jobs of unknown outcome); they lead the details of the message.
	Notes []string
	// Causes say why the resources are not ready (internal/waitcause,
	// through kubewait.Explain); they end the details of the message.
	Causes []string
}

// WithCauses returns a copy of e with causes added after its own, for
// kubewait.Explain.
func (e *NotReadyError) WithCauses(causes []string) error {
	explained := *e
	explained.Causes = append(append([]string{}, e.Causes...), causes...)
	return &explained
}

// withNote returns a copy of e with note added to its notes.
func (e *NotReadyError) withNote(note string) *NotReadyError {
	noted := *e
	noted.Notes = append(append([]string{}, e.Notes...), note)
	return &noted
}

// Error words the failed wait as a failed readiness wait of Helm's action
// is worded (kubewait.WaitError): on one line, upstream's words first.
func (e *NotReadyError) Error() string {
	if len(e.Resources) == 0 {
		return fmt.Sprintf("resources not ready within %s: %s", e.Timeout, kubewait.OneLine(e.Err.Error()))
	}
	return (&kubewait.WaitError{Ending: endingOf(e.Err), Objects: e.Resources, Notes: e.Notes, Causes: e.Causes}).Error()
}

// endingOf tells how the waiter's wait ended: as Helm's status waiter
// said, else by the context's error it returned; Helm's legacy waiter
// returns any other error when it gives up early (a failed Job or Pod).
func endingOf(err error) kubewait.Ending {
	var we *kubewait.WaitError
	switch {
	case errors.As(err, &we):
		return we.Ending
	case errors.Is(err, context.DeadlineExceeded):
		return kubewait.TimedOut
	case errors.Is(err, context.Canceled):
		return kubewait.Canceled
	default:
		return kubewait.Stalled
	}
}

func (e *NotReadyError) Unwrap() error { return e.Err }

// WaitReady waits up to timeout for the resources of rel's manifest to
// become ready, with Helm's waiter for strategy (kube.StatusWatcherStrategy
// or kube.LegacyStrategy), Jobs included when waitForJobs. The manifest is
// built with kubeClient.Build(manifest, false), as Helm builds the current
// release.
//
// When the resources are not ready in time it returns a *NotReadyError
// naming each of them with its status and message. When ctx ends first it
// returns an error wrapping ctx's error; the revision should then stay
// pending (the wait resumes later, see IsAwaitingReadiness) rather than be
// failed. Helm's legacy waiter cannot be interrupted: it then goes on in
// the background until its timeout.
func WaitReady(ctx context.Context, kubeClient kube.Interface, rel *releasev1.Release, strategy kube.WaitStrategy, waitForJobs bool, timeout time.Duration, opts ...WaitOption) error {
	switch {
	case kubeClient == nil:
		return errors.New("afterhooks: nil kube client")
	case rel == nil:
		return errors.New("afterhooks: nil release")
	case timeout <= 0:
		return fmt.Errorf("afterhooks: readiness wait needs a positive timeout, got %s", timeout)
	}
	if strategy != kube.StatusWatcherStrategy && strategy != kube.LegacyStrategy {
		return fmt.Errorf("afterhooks: readiness wait strategy must be %q or %q, got %q", kube.StatusWatcherStrategy, kube.LegacyStrategy, strategy)
	}
	o := waitOptions{fetch: fetchLive}
	for _, opt := range opts {
		opt(&o)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("afterhooks: readiness wait of %s interrupted: %w", releaseRef(rel), err)
	}

	resources, err := kubeClient.Build(bytes.NewBufferString(rel.Manifest), false)
	if err != nil {
		return fmt.Errorf("afterhooks: building the resources of %s: %w", releaseRef(rel), err)
	}
	if len(resources) == 0 {
		return nil
	}

	waitOpts := []kube.WaitOption{kube.WithWaitContext(ctx)}
	if len(o.readers) > 0 {
		waitOpts = append(waitOpts, kube.WithKStatusReaders(o.readers...))
	}
	waiter, err := kubewait.Waiter(kubeClient, strategy, waitOpts...)
	if err != nil {
		return fmt.Errorf("afterhooks: readiness waiter: %w", err)
	}

	done := make(chan error, 1)
	go func() {
		if waitForJobs {
			done <- waiter.WaitWithJobs(resources, timeout)
		} else {
			done <- waiter.Wait(resources, timeout)
		}
	}()
	select {
	case <-ctx.Done():
		return fmt.Errorf("afterhooks: readiness wait of %s interrupted: %w", releaseRef(rel), ctx.Err())
	case err = <-done:
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		// One line: the error reaches a condition when the wait is abandoned.
		return fmt.Errorf("afterhooks: readiness wait of %s interrupted: %w (%w)", releaseRef(rel), ctx.Err(), err)
	}

	nre := &NotReadyError{Timeout: timeout, Err: err}
	var noted *kubewait.WaitError
	if errors.As(err, &noted) {
		nre.Notes = append(nre.Notes, noted.Notes...)
	}
	if strategy == kube.StatusWatcherStrategy {
		nre.Resources = parseStatusWatcherError(err)
	}
	if len(nre.Resources) == 0 {
		if o.clientSet == nil && strategy == kube.LegacyStrategy {
			o.clientSet = clientSetOf(kubeClient)
		}
		dctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
		nre.Resources = diagnose(dctx, resources, strategy, waitForJobs, o)
		cancel()
	}
	sortStatuses(nre.Resources)
	return nre
}

func releaseRef(rel *releasev1.Release) string {
	return fmt.Sprintf("release %s/%s.v%d", rel.Namespace, rel.Name, rel.Version)
}

// parseStatusWatcherError extracts the resources Helm's status watcher
// named in its error, reworded (kubewait.WaitError) or not.
func parseStatusWatcherError(err error) []ResourceStatus {
	return kubewait.NotReadyIn(err)
}

// diagnose reads the live objects and reports those that are not ready:
// for the legacy strategy with a clientset, by Helm's ReadyChecker (what
// the legacy waiter waited for), otherwise by kstatus. Messages come from
// kstatus.
func diagnose(ctx context.Context, resources kube.ResourceList, strategy kube.WaitStrategy, waitForJobs bool, o waitOptions) []ResourceStatus {
	var checker *kube.ReadyChecker
	if strategy == kube.LegacyStrategy && o.clientSet != nil {
		c := kube.NewReadyChecker(o.clientSet, kube.PausedAsReady(true), kube.CheckJobs(waitForJobs))
		checker = &c
	}
	var out []ResourceStatus
	for _, info := range resources {
		if info == nil {
			continue
		}
		rs := ResourceStatus{Kind: kindOf(info), Namespace: info.Namespace, Name: info.Name}
		live, err := o.fetch(ctx, info)
		switch {
		case apierrors.IsNotFound(err):
			rs.Status, rs.Message = status.NotFoundStatus.String(), "resource not found"
		case err != nil:
			rs.Status, rs.Message = status.UnknownStatus.String(), err.Error()
		default:
			if isPausedDeployment(live) {
				continue // Helm does not wait for paused Deployments
			}
			res, cerr := status.Compute(live)
			if cerr != nil {
				rs.Status, rs.Message = status.UnknownStatus.String(), cerr.Error()
			} else {
				rs.Status, rs.Message = res.Status.String(), res.Message
			}
		}
		if checker != nil {
			ready, rerr := checker.IsReady(ctx, info)
			if ready && rerr == nil {
				continue
			}
			if rs.Status == status.CurrentStatus.String() {
				rs.Message = strings.TrimSpace(rs.Message + " (not ready by Helm's legacy readiness checks)")
				if rerr != nil {
					rs.Message += ": " + rerr.Error()
				}
			}
		} else if rs.Status == status.CurrentStatus.String() {
			continue
		}
		out = append(out, rs)
	}
	return out
}

func kindOf(info *resource.Info) string {
	if info.Mapping != nil && info.Mapping.GroupVersionKind.Kind != "" {
		return info.Mapping.GroupVersionKind.Kind
	}
	if info.Object != nil {
		return info.Object.GetObjectKind().GroupVersionKind().Kind
	}
	return ""
}

func isPausedDeployment(u *unstructured.Unstructured) bool {
	if u == nil || u.GroupVersionKind().GroupKind() != appsv1.SchemeGroupVersion.WithKind("Deployment").GroupKind() {
		return false
	}
	paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused")
	return paused
}

// fetchLive reads the live object of info from the cluster.
func fetchLive(_ context.Context, info *resource.Info) (*unstructured.Unstructured, error) {
	if info.Client == nil || info.Mapping == nil {
		return nil, fmt.Errorf("no REST client for %s %s", kindOf(info), info.Name)
	}
	obj, err := resource.NewHelper(info.Client, info.Mapping).Get(info.Namespace, info.Name)
	if err != nil {
		return nil, err
	}
	u, err := patch.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	if u.GetKind() == "" {
		u.SetGroupVersionKind(info.Mapping.GroupVersionKind)
	}
	return u, nil
}

// clientSetOf returns the clientset of a Helm kube client (or of a client
// that offers one), or nil.
func clientSetOf(kc kube.Interface) kubernetes.Interface {
	var cs *kubernetes.Clientset
	var err error
	switch c := kc.(type) {
	case *kube.Client:
		if c.Factory == nil {
			return nil
		}
		cs, err = c.Factory.KubernetesClientSet()
	case interface {
		KubernetesClientSet() (*kubernetes.Clientset, error)
	}:
		cs, err = c.KubernetesClientSet()
	default:
		return nil
	}
	if err != nil || cs == nil {
		return nil
	}
	return cs
}

func sortStatuses(rs []ResourceStatus) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}
