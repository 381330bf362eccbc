package action

import (
	"context"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/go-logr/logr/testr"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/test/databasecrd"
)

// guardsChart has a plain Job and, with values.db, a Database custom
// resource whose spec.size a CRD validation rule makes immutable. Both
// carry values.annotations.
func guardsChart(version string) *chartv2.Chart {
	const job = `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
  annotations: {{- toYaml .Values.annotations | nindent 4 }}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: migrate
          image: {{ .Values.image }}
`
	const db = `{{- if .Values.db }}
apiVersion: guards.example.com/v1
kind: Database
metadata:
  name: {{ .Release.Name }}-db
  annotations: {{- toYaml .Values.annotations | nindent 4 }}
spec:
  size: {{ .Values.size | quote }}
{{- end }}
`
	return &chartv2.Chart{
		Metadata: &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "guards", Version: version},
		Templates: []*common.File{
			{Name: "templates/job.yaml", Data: []byte(job)},
			{Name: "templates/db.yaml", Data: []byte(db)},
		},
	}
}

var databases = databasecrd.Resource("guards.example.com")

// databaseCRD installs the Database CRD, whose spec.size may not change
// once set, and waits until it is served.
func databaseCRD(t *testing.T, cfg *rest.Config) {
	t.Helper()
	cs := apiextensions.NewForConfigOrDie(cfg)
	_, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), databasecrd.CRD(databases.Group), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(databases).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the Database CRD is not served: %v", err)
	}
}

// ownedClaim creates a PersistentVolumeClaim owned by owner, as an
// operator makes one for the object it runs.
func ownedClaim(t *testing.T, cs kubernetes.Interface, ns, name string, owner metav1.OwnerReference) types.UID {
	t.Helper()
	created, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(context.Background(), databasecrd.OwnedClaim(ns, name, owner), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created.UID
}

// TestAgainstAPIServerRecreateGuards upgrades objects the API server
// refuses to update in place, with consent, where a guard must stop the
// recreate: nothing is deleted and the error names the object, the field
// and the guard. Where no guard applies the object is recreated.
func TestAgainstAPIServerRecreateGuards(t *testing.T) {
	restCfg := apiServer(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(restCfg)
	dyn := dynamic.NewForConfigOrDie(restCfg)
	const ns = "recreate-guards"
	createNamespaces(t, cs, ns)
	databaseCRD(t, restCfg)
	factory, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	enabled := map[string]any{"helm.toolkit.fluxcd.io/force": "enabled"}
	annotate := func(annotations map[string]string) func(t *testing.T, name string, job, db *unstructured.Unstructured) {
		return func(t *testing.T, name string, job, _ *unstructured.Unstructured) {
			job.SetAnnotations(mergeStrings(job.GetAnnotations(), annotations))
			if _, err := dyn.Resource(jobs).Namespace(ns).Update(ctx, job, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	tests := []struct {
		name        string
		annotations map[string]any
		db          bool
		gate, force bool
		// prepare changes the cluster after the install; it returns the
		// UID of an object that must survive, if any.
		prepare func(t *testing.T, name string, job, db *unstructured.Unstructured)
		claim   string // "job" or "db": a PVC owned by it
		// wantErr are parts of the upgrade's error; none: recreated.
		wantErr []string
		wantNot string
	}{
		{name: "keep-manifest", annotations: map[string]any{"helm.toolkit.fluxcd.io/force": "enabled", "helm.sh/resource-policy": "keep"},
			wantErr: []string{"Job/recreate-guards/keep-manifest-migrate: spec.template: field is immutable; not recreated: its manifest says helm.sh/resource-policy: keep"}},
		{name: "keep-live", annotations: enabled, prepare: annotate(map[string]string{"helm.sh/resource-policy": "keep"}),
			wantErr: []string{"not recreated: the object in the cluster says helm.sh/resource-policy: keep"}},
		{name: "other-release", annotations: enabled, prepare: annotate(map[string]string{"meta.helm.sh/release-name": "someone-else"}),
			wantErr: []string{"not recreated: it belongs to release recreate-guards/someone-else"}},
		{name: "disabled-live", annotations: enabled, prepare: annotate(map[string]string{"helm.toolkit.fluxcd.io/force": "disabled"}),
			wantErr: []string{"not recreated: the object in the cluster says helm.toolkit.fluxcd.io/force: disabled"}},
		{name: "disabled-live-gate", gate: true, prepare: annotate(map[string]string{"helm.toolkit.fluxcd.io/force": "disabled"}),
			wantErr: []string{"the object in the cluster says helm.toolkit.fluxcd.io/force: disabled"}},
		{name: "finalizer", annotations: enabled, prepare: func(t *testing.T, name string, job, _ *unstructured.Unstructured) {
			job.SetFinalizers([]string{"example.com/backup"})
			if _, err := dyn.Resource(jobs).Namespace(ns).Update(ctx, job, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, wantErr: []string{"not recreated: it has the finalizer example.com/backup"}},
		{name: "job-owns-claim", annotations: enabled, claim: "job",
			wantErr: []string{"not recreated: it owns PersistentVolumeClaim/recreate-guards/job-owns-claim-data, whose data a recreate would delete"}},
		{name: "db-owns-claim-force", db: true, force: true, claim: "db",
			wantErr: []string{"Database/recreate-guards/db-owns-claim-force-db: spec.size", "size is immutable",
				"not recreated: it owns PersistentVolumeClaim/recreate-guards/db-owns-claim-force-data"}, wantNot: "annotate"},
		{name: "db-owns-claim-gate", db: true, gate: true, claim: "db",
			wantErr: []string{"Database/recreate-guards/db-owns-claim-gate-db: spec.size", "not recreated: it owns PersistentVolumeClaim/"}},
		{name: "db-owns-claim-annotated", db: true, annotations: enabled, claim: "db",
			wantErr: []string{"Database/recreate-guards/db-owns-claim-annotated-db: spec.size", "size is immutable",
				"not recreated: it owns PersistentVolumeClaim/recreate-guards/db-owns-claim-annotated-data, whose data a recreate would delete"}},
		{name: "db-gate-no-dependents", db: true, gate: true,
			wantErr: []string{"Database/recreate-guards/db-gate-no-dependents-db: spec.size", "annotate it helm.toolkit.fluxcd.io/force: enabled to let"}, wantNot: "feature gate"},
		{name: "db-annotated", db: true, annotations: enabled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := newHR(func(o *v2.HelmRelease) {
				o.Name, o.Namespace = tt.name, ns
				o.Spec.Install = &v2.Install{Install: helmv2.Install{DisableWait: true}}
				o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{DisableWait: true, Force: tt.force}}
			})
			cfg, err := factory.Build(ns, ns, withLogger(testr.New(t)))
			if err != nil {
				t.Fatal(err)
			}
			opts := asked{config: Config{RecreateImmutable: tt.gate}}
			values := func(image, size string) map[string]any {
				return map[string]any{"image": image, "size": size, "db": tt.db, "annotations": tt.annotations}
			}
			if _, err := Install(ctx, cfg, obj, guardsChart("1.0.0"), values("migrate:1", "1Gi"), planned(t, nil, obj, plan.Install, opts)); err != nil {
				t.Fatalf("install: %v", err)
			}
			finishJob(t, cs, ns, tt.name+"-migrate")
			job, err := dyn.Resource(jobs).Namespace(ns).Get(ctx, tt.name+"-migrate", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var db *unstructured.Unstructured
			if tt.db {
				if db, err = dyn.Resource(databases).Namespace(ns).Get(ctx, tt.name+"-db", metav1.GetOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if tt.prepare != nil {
				tt.prepare(t, tt.name, job, db)
			}
			var claim types.UID
			switch tt.claim {
			case "job":
				claim = ownedClaim(t, cs, ns, tt.name+"-data", metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: job.GetName(), UID: job.GetUID()})
			case "db":
				claim = ownedClaim(t, cs, ns, tt.name+"-data", metav1.OwnerReference{APIVersion: "guards.example.com/v1", Kind: "Database", Name: db.GetName(), UID: db.GetUID()})
			}

			// The Job's image or the Database's size: a field the API
			// server refuses to change in place.
			next := values("migrate:2", "1Gi")
			if tt.db {
				next = values("migrate:1", "2Gi")
			}
			_, upErr := Upgrade(ctx, cfg, obj, guardsChart("1.1.0"), next, planned(t, cfg, obj, plan.Upgrade, opts))

			refusedObj, refusedRes := job, jobs
			if tt.db {
				refusedObj, refusedRes = db, databases
			}
			after, err := dyn.Resource(refusedRes).Namespace(ns).Get(ctx, refusedObj.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the refused object after the upgrade: %v", err)
			}
			if claim != "" {
				pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, tt.name+"-data", metav1.GetOptions{})
				if err != nil || pvc.UID != claim || pvc.DeletionTimestamp != nil {
					t.Errorf("the owned PersistentVolumeClaim after the upgrade: %v (same uid %v)", err, err == nil && pvc.UID == claim)
				}
			}
			if len(tt.wantErr) == 0 {
				if upErr != nil {
					t.Fatalf("upgrade: %v", upErr)
				}
				if after.GetUID() == refusedObj.GetUID() {
					t.Error("the object kept its uid: not recreated")
				}
				return
			}
			if upErr == nil {
				t.Fatal("upgrade succeeded, want it refused")
			}
			for _, part := range tt.wantErr {
				if !strings.Contains(upErr.Error(), part) {
					t.Errorf("error %q does not contain %q", upErr, part)
				}
			}
			if tt.wantNot != "" && strings.Contains(upErr.Error(), tt.wantNot) {
				t.Errorf("error %q must not contain %q", upErr, tt.wantNot)
			}
			if after.GetUID() != refusedObj.GetUID() || after.GetDeletionTimestamp() != nil {
				t.Error("the refused object was deleted")
			}
			if tt.prepare != nil && len(after.GetFinalizers()) > 0 {
				// Let the namespace's objects go when the package ends.
				after.SetFinalizers(nil)
				_, _ = dyn.Resource(refusedRes).Namespace(ns).Update(ctx, after, metav1.UpdateOptions{})
			}
		})
	}
}

var jobs = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}

func mergeStrings(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
