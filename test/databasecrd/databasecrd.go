// Package databasecrd builds the cluster setup of the recreate guard
// tests (internal/action and test/e2e): a Database custom resource whose
// spec.size a CRD validation rule makes immutable, as an operator's CRD
// protects the size of the volume it made, and the PersistentVolumeClaim
// such an operator owns under it.
package databasecrd

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	corev1 "k8s.io/api/core/v1"
)

// Kind and Message are the Database's kind and what the API server says
// when its size is changed.
const (
	Kind    = "Database"
	Message = "size is immutable"
)

// Resource is the Database resource of group, version v1.
func Resource(group string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: "v1", Resource: "databases"}
}

// CRD is the namespaced Database CRD of group: spec.size may not change
// once set.
func CRD(group string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "databases." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "databases", Singular: "database", Kind: Kind, ListKind: Kind + "List"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"size": {Type: "string", XValidations: apiextensionsv1.ValidationRules{
								{Rule: "self == oldSelf", Message: Message},
							}},
						}},
					},
				}},
			}},
		},
	}
}

// OwnedClaim is a PersistentVolumeClaim name in ns owned by owner, as an
// operator makes one for the object it runs. Its storage class does not
// exist, so it stays Pending: what counts is the ownerReference, through
// which the garbage collector would delete it with its owner.
func OwnedClaim(ns, name string, owner metav1.OwnerReference) *corev1.PersistentVolumeClaim {
	class := "e2e-none"
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: []metav1.OwnerReference{owner}},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}
