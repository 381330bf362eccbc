package action

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"helm.sh/helm/v4/pkg/chart/common"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/test/workflowpolicy"
)

// The WorkflowTemplate case: a Workflow may only be created once a
// WorkflowTemplate exists in its namespace. A ValidatingAdmissionPolicy
// whose parameter is the WorkflowTemplate denies a Workflow when no
// parameter is found. Helm applies custom resources last, sorted by kind,
// so Workflow comes before WorkflowTemplate and the install fails; with
// resource groups and ordered it succeeds.

const workflowTemplateYAML = `apiVersion: seq.example.com/v1
kind: WorkflowTemplate
metadata:
  name: {{ .Release.Name }}-build
  annotations:
    helm.sh/resource-group: templates
`

const workflowYAML = `apiVersion: seq.example.com/v1
kind: Workflow
metadata:
  name: {{ .Release.Name }}-run
  annotations:
    helm.sh/resource-group: workflows
    helm.sh/depends-on/resource-groups: '["templates"]'
spec:
  templateRef: {{ .Release.Name }}-build
`

var workflowGVR = schema.GroupVersionResource{Group: "seq.example.com", Version: "v1", Resource: "workflows"}

func TestAgainstAPIServerOrderedCustomResources(t *testing.T) {
	restCfg := apiServer(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(restCfg)
	dyn := dynamic.NewForConfigOrDie(restCfg)
	createNamespaces(t, cs, "workflows", "workflows-probe")
	for _, kind := range []string{"Workflow", "WorkflowTemplate"} {
		createCRD(t, apiextensions.NewForConfigOrDie(restCfg), workflowpolicy.CRD("seq.example.com", kind))
	}
	denyWorkflowsWithoutTemplate(t, cs)
	waitPolicyEnforced(t, dyn)

	factory, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	chrt := crdChartVersion("1", nil,
		&common.File{Name: "templates/template.yaml", Data: []byte(workflowTemplateYAML)},
		&common.File{Name: "templates/workflow.yaml", Data: []byte(workflowYAML)})
	chrt.Metadata.Name = "pipeline"

	for _, tc := range []struct {
		name    string
		ordered bool
	}{{name: "unordered", ordered: false}, {name: "ordered", ordered: true}} {
		t.Run(tc.name, func(t *testing.T) {
			obj := newHR(func(o *v2.HelmRelease) {
				o.Name, o.Namespace = tc.name, "workflows"
				o.Spec.Timeout = dur(time.Minute)
				if tc.ordered {
					o.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered}
				}
			})
			cfg, err := factory.Build("workflows", "workflows", withLogger(testr.New(t)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Install(ctx, cfg, obj, chrt, nil, planned(t, nil, obj, plan.Install, asked{}))
			if !tc.ordered {
				if err == nil || !strings.Contains(err.Error(), workflowpolicy.Name) {
					t.Fatalf("install error = %v, want the admission policy's denial", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("install: %v", err)
			}
			if _, err := dyn.Resource(workflowGVR).Namespace("workflows").Get(ctx, "ordered-run", metav1.GetOptions{}); err != nil {
				t.Errorf("the Workflow: %v", err)
			}
		})
	}
}

func createCRD(t *testing.T, ext apiextensions.Interface, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	ctx := context.Background()
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err == nil {
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRD %s not established: %v", crd.Name, err)
		}
	}
}

// denyWorkflowsWithoutTemplate admits a Workflow only when a
// WorkflowTemplate exists in its namespace.
func denyWorkflowsWithoutTemplate(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	policy, binding := workflowpolicy.Policy("seq.example.com")
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// waitPolicyEnforced waits until the API server denies a Workflow in a
// namespace without templates: policies take effect asynchronously.
func waitPolicyEnforced(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "seq.example.com/v1", "kind": "Workflow",
		"metadata": map[string]any{"name": "probe"},
	}}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, err := dyn.Resource(workflowGVR).Namespace("workflows-probe").Create(context.Background(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), workflowpolicy.Name) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the admission policy is not enforced after a minute: %v", err)
		}
	}
}
