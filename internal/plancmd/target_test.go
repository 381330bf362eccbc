package plancmd

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/afterhooks/helm-controller/test/envtestserver"
)

// A change that moves the release (releaseName, targetNamespace,
// storageNamespace) is planned as the controller carries it out: the
// uninstall of the release the status records, read where it is, then
// the install at the new target.
func TestPlanCommandTargetMove(t *testing.T) {
	c := newCluster(t)
	obj := c.createHR(t, "web", nil)
	chart := chartDir(t, "1.0.0")
	installWeb(t, c, obj, chart)
	// As the controller records it before the machine runs.
	obj.Status.StorageNamespace = c.ns
	if err := c.c.Status().Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	other := c.ns + "-other"
	envtestserver.CreateNamespaces(t, kubernetes.NewForConfigOrDie(c.cfg), other)
	for _, tc := range []struct {
		name, head, reason string
	}{
		{"release name", "  releaseName: frontend\n", "release name changed from 'web' to 'frontend'"},
		{"target namespace", "  targetNamespace: " + other + "\n", "release namespace changed from '" + c.ns + "' to '" + other + "'"},
		{"storage namespace", "  storageNamespace: " + other + "\n", "storage namespace changed from '" + c.ns + "' to '" + other + "'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeHR(t, "  interval: 1m\n"+tc.head)
			code, out, errOut := run(t, "-n", c.ns, "--file", file, "--chart", chart, "--kubeconfig", c.kubeconfig)
			if code != ExitChanges {
				t.Fatalf("exit %d, stderr %q:\n%s", code, errOut, out)
			}
			uninstall := strings.Index(out, "\nuninstall,")
			install := strings.Index(out, "\ninstall,")
			for _, want := range []string{"next step: reinstall", "state TargetChanged: " + tc.reason, "- ConfigMap/web", "+ ConfigMap/web"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if uninstall < 0 || install < uninstall {
				t.Errorf("want the uninstall of the recorded release, then the install:\n%s", out)
			}
		})
	}
}
