package reconcile

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
)

// upstreamConstants reads the string constants of upstream's API package
// (github.com/fluxcd/helm-controller/api/v2) from its source in the module
// cache, by name, from the files named.
func upstreamConstants(t *testing.T, files ...string) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/fluxcd/helm-controller/api").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("upstream's API source is not in the module cache: %v", err)
	}
	consts := map[string]string{}
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "v2", name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok || len(spec.Values) != len(spec.Names) {
				return true
			}
			for i, v := range spec.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					consts[spec.Names[i].Name], _ = strconv.Unquote(lit.Value)
				}
			}
			return true
		})
	}
	return consts
}

// TestUpstreamNamesEachEventAction derives the action of each Helm and drift
// reason from upstream's own source: a reason "<Verb>Succeeded" or
// "<Verb>Failed" reports on upstream's action "Helm<Verb>", and a reason
// about drift on the action whose name starts with "Drift". Upstream's
// actions and reasons are read from the module cache, so a reason or an
// action upstream adds or renames shows here.
func TestUpstreamNamesEachEventAction(t *testing.T) {
	actions := map[string]helmv2.Action{}
	for name, value := range upstreamConstants(t, "action.go") {
		if strings.HasPrefix(name, "Action") {
			actions[value] = helmv2.Action(value)
		}
	}
	reasons := upstreamConstants(t, "condition_types.go")
	// Ours are named as upstream's are.
	for _, r := range []string{DriftCorrectedReason, DriftCorrectionFailedReason, DriftDetectionFailedReason} {
		reasons[r+"Reason"] = r
	}
	derived := 0
	for name, reason := range reasons {
		if !strings.HasSuffix(name, "Reason") {
			continue
		}
		var want helmv2.Action
		verb := strings.TrimSuffix(strings.TrimSuffix(reason, "Succeeded"), "Failed")
		switch {
		case verb != reason && actions["Helm"+verb] != "":
			want = actions["Helm"+verb]
		case strings.HasPrefix(reason, "Drift") && reason != "NoDriftDetected":
			want = actions["DriftDetection"]
		default:
			continue
		}
		derived++
		if got := EventAction(reason); got != want {
			t.Errorf("EventAction(%s) = %s, upstream's names say %s", reason, got, want)
		}
	}
	if derived < 12 || len(actions) < 10 {
		t.Fatalf("derived %d reasons from %d upstream actions: the scan no longer reads upstream's source", derived, len(actions))
	}

	// The three reasons of ours that carry no verb report on what
	// upstream's action documentation names: a health check cancelled by a
	// new revision, a release left pending; a state error on the reconcile
	// as a whole.
	for reason, want := range map[string]string{
		meta.HealthCheckCanceledReason: "HealthCheck",
		pendingReleaseReason:           "Unlock",
		stateErrorReason:               "Reconcile",
	} {
		if got := EventAction(reason); got != actions[want] || got == "" {
			t.Errorf("EventAction(%s) = %s, want upstream's %s", reason, got, want)
		}
	}
}
