package plancmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/chartutil"
	"github.com/opencontainers/go-digest"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// A release whose upgrade failed with its retries used up is left alone,
// and the plan of the live spec says so; a file with another spec (here
// only the timeout changes) is a new generation once applied, for which
// the controller counts failures afresh and upgrades: the plan of the
// file says upgrade. Found by the harness (a values step after a failed
// upgrade, planned as nothing; the controller upgraded).
func TestPlanCommandFileWithANewSpecRetriesAnExhaustedUpgrade(t *testing.T) {
	c := newCluster(t)
	obj := c.createHR(t, "web", nil)
	chart := chartDir(t, "1.0.0")
	installWeb(t, c, obj, chart)
	// The controller records the install in the status, history included:
	// the revision is the HelmRelease's own, not one to take over.
	if err := c.c.Status().Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}

	// The spec asks for a=2; its upgrade failed once, and the upgrade
	// remediation's default allows no retry.
	obj.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"a":"2"}`)}
	if err := c.c.Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	st := &obj.Status
	st.LastAttemptedGeneration = obj.Generation
	st.LastAttemptedConfigDigest = chartutil.DigestValues(digest.Canonical, map[string]any{"a": "2"}).String()
	st.LastAttemptedRevision = "1.0.0"
	st.LastAttemptedReleaseAction = "upgrade"
	st.UpgradeFailures, st.Failures = 1, 1
	if err := c.c.Status().Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := run(t, "-n", c.ns, "web", "--chart", chart, "--kubeconfig", c.kubeconfig)
	if code != ExitNoChange || !strings.Contains(out, "retries exhausted") {
		t.Fatalf("the live spec: exit %d, stderr %q, want %d with the retries exhausted:\n%s", code, errOut, ExitNoChange, out)
	}

	// The live spec written to a file is no new generation.
	same := writeHR(t, "  interval: 1m\n")
	code, out, errOut = run(t, "-n", c.ns, "--file", same, "--chart", chart, "--kubeconfig", c.kubeconfig)
	if code != ExitNoChange || !strings.Contains(out, "retries exhausted") {
		t.Fatalf("a file with the live spec: exit %d, stderr %q, want %d with the retries exhausted:\n%s", code, errOut, ExitNoChange, out)
	}
	changed := writeHR(t, "  interval: 1m\n  timeout: 2m\n")
	code, out, errOut = run(t, "-n", c.ns, "--file", changed, "--chart", chart, "--kubeconfig", c.kubeconfig)
	if code != ExitChanges || !strings.Contains(out, "next step: upgrade") {
		t.Fatalf("a file with a new spec: exit %d, stderr %q, want %d with an upgrade:\n%s", code, errOut, ExitChanges, out)
	}
}

// writeHR writes the HelmRelease web asking for a=2 from the chartRef
// charts, with the spec lines head first.
func writeHR(t *testing.T, head string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "hr.yaml")
	hr := "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: web\nspec:\n" + head +
		"  chartRef:\n    kind: OCIRepository\n    name: charts\n  values:\n    a: \"2\"\n"
	if err := os.WriteFile(file, []byte(hr), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}
