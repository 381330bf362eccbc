// Package workflowpolicy builds the cluster setup of the WorkflowTemplate
// sequencing tests (internal/action and test/e2e): CRDs of kind Workflow
// and WorkflowTemplate, and a ValidatingAdmissionPolicy whose parameter is
// the WorkflowTemplate, so that a Workflow is only admitted once a
// template exists in its namespace. Helm applies custom resources last,
// sorted by kind, so Workflow comes before WorkflowTemplate: unordered
// installs are denied, ordered ones are not.
package workflowpolicy

import (
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Name is the policy's and the binding's, which denials quote.
const Name = "workflow-needs-template"

// CRD is a namespaced CRD of kind in group, version v1, with any fields.
func CRD(group, kind string) *apiextensionsv1.CustomResourceDefinition {
	plural := strings.ToLower(kind) + "s"
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, Plural: plural, Singular: strings.ToLower(kind)},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
			}},
		},
	}
}

// Policy returns the policy and its binding for Workflows of group: every
// WorkflowTemplate of the Workflow's namespace is a parameter, and none
// found denies.
func Policy(group string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	fail := admissionv1.Fail
	deny := admissionv1.DenyAction
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: Name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			ParamKind:     &admissionv1.ParamKind{APIVersion: group + "/v1", Kind: "WorkflowTemplate"},
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{"workflows"}},
				},
			}}},
			// The parameter's existence is the whole check.
			Validations: []admissionv1.Validation{{Expression: "true"}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: Name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			ParamRef:          &admissionv1.ParamRef{Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: &deny},
		},
	}
	return policy, binding
}
