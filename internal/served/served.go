// Package served checks, before the manager starts, that the API server
// serves every kind the controller watches.
//
// A watch on a kind the API server does not serve never syncs: the manager
// waits for its cache until the sync timeout and then exits with a message
// that names no CRD. Asking the REST mapper first turns that into a start-up
// error naming each missing CRD, its API version and what to do about it.
package served

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Kind is a kind the controller watches.
type Kind struct {
	// Object is an empty object of the kind, typed or
	// metav1.PartialObjectMetadata with its TypeMeta set.
	Object client.Object
	// Fix tells an operator how to get the kind served, e.g. which CRDs to
	// install or which feature gate needs it.
	Fix string
}

// Check asks mapper about every kind and returns one error naming each kind
// the API server does not serve. Any other failure to ask (the API server
// unreachable, discovery refused) is returned as it is: it says nothing
// about the CRDs.
func Check(mapper meta.RESTMapper, scheme *runtime.Scheme, kinds []Kind) error {
	var missing []error
	for _, k := range kinds {
		gvk, err := apiutil.GVKForObject(k.Object, scheme)
		if err != nil {
			return fmt.Errorf("finding the kind of %T: %w", k.Object, err)
		}
		_, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		switch {
		case err == nil:
		case meta.IsNoMatchError(err):
			missing = append(missing, notServed(gvk, k.Fix))
		default:
			return fmt.Errorf("asking the API server whether it serves %s: %w", resourceName(gvk), err)
		}
	}
	return errors.Join(missing...)
}

// notServed names the kind as CRDs are named (plural.group) with the API
// version the controller reads.
func notServed(gvk schema.GroupVersionKind, fix string) error {
	msg := fmt.Sprintf("the API server does not serve %s (%s)", resourceName(gvk), gvk.GroupVersion())
	if fix != "" {
		msg += ": " + fix
	}
	return errors.New(msg)
}

// resourceName is the kind's resource, plural.group, which for a custom
// resource is the name of its CRD. The REST mapper cannot give the plural
// of a kind it does not know, so it is derived from the kind as the API
// machinery does for kinds without an explicit plural; every kind this
// controller watches follows that rule.
func resourceName(gvk schema.GroupVersionKind) string {
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	if gvk.Group == "" {
		return plural.Resource
	}
	return plural.Resource + "." + gvk.Group
}
