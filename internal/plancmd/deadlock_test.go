package plancmd

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// deadlockChart is a chart whose Deployment mounts Secret web-creds that
// only its post-install hook makes (here a Job; asHook: the Secret is the
// hook itself).
func deadlockChart(t *testing.T, asHook bool) string {
	t.Helper()
	dir := t.TempDir()
	hook := "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: web-create-creds\n  annotations:\n    helm.sh/hook: post-install,post-upgrade\n" +
		"spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: create\n          image: example.com/create:1\n"
	if asHook {
		hook = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: web-creds\n  annotations:\n    helm.sh/hook: post-install\nstringData:\n  password: x\n"
	}
	files := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n",
		"templates/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector:\n    matchLabels: {app: web}\n" +
			"  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: app\n          image: example.com/app:1\n" +
			"          envFrom:\n            - configMapRef: {name: web-optional, optional: true}\n" +
			"          volumeMounts:\n            - {name: creds, mountPath: /creds}\n      volumes:\n        - name: creds\n          secret: {secretName: web-creds}\n",
		"templates/hook.yaml": hook,
	}
	writeFiles(t, dir, files)
	return dir
}

// The plan of the chart this controller exists for warns before the
// install: the Deployment's pods need a Secret that nothing has yet, and
// the post hooks that might make it run only after the readiness wait.
// Under afterHooks, or with the Secret in the cluster, it does not.
func TestPlanWarnsOfAWaitThatCannotEnd(t *testing.T) {
	c := newCluster(t)
	jobHook := "the pods of Deployment/web need Secret web-creds, which neither the release's objects nor the cluster have; " +
		"1 post-install hook runs after the readiness wait; if one of them creates web-creds, set waitStrategy: afterHooks"
	secretHook := "the pods of Deployment/web need Secret web-creds, which is a post-install hook: it is created only after the readiness wait, " +
		"so the wait cannot end; set waitStrategy: afterHooks"
	for _, tc := range []struct {
		name   string
		asHook bool
		args   []string
		secret bool
		want   string // empty: no warning
	}{
		{"a Job hook may make it", false, nil, false, jobHook},
		{"the Secret is the hook", true, nil, false, secretHook},
		{"afterHooks: the hooks run before the wait", false, []string{"--default-wait-strategy", "afterHooks"}, false, ""},
		{"the Secret exists", false, nil, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.secret {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-creds", Namespace: c.ns}}
				if err := c.c.Create(context.Background(), s); err != nil {
					t.Fatal(err)
				}
			}
			file := writeHR(t, "  interval: 1m\n")
			args := append([]string{"-n", c.ns, "--file", file, "--chart", deadlockChart(t, tc.asHook), "--kubeconfig", c.kubeconfig}, tc.args...)
			code, out, errOut := run(t, args...)
			if code != ExitChanges {
				t.Fatalf("exit %d, stderr %q:\n%s", code, errOut, out)
			}
			warned := strings.Contains(out, "warning:")
			switch {
			case tc.want == "" && warned:
				t.Errorf("a warning, want none:\n%s", out)
			case tc.want != "" && !strings.Contains(out, "warning: "+tc.want):
				t.Errorf("output lacks the warning %q:\n%s", tc.want, out)
			}
			// The review comment carries it too.
			_, md, _ := run(t, append(args, "-o", "markdown")...)
			if warned != strings.Contains(md, "**warning**: ") {
				t.Errorf("the markdown and the text disagree on the warning:\n%s", md)
			}
		})
	}
}
