package helmclient

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// unappliable are the annotations of HIP-0025 that the API server refuses:
// an annotation key has at most one '/', and helm.sh/depends-on/
// resource-groups has two. The release manifest keeps them, which is where
// the order is read from; the objects sent to the cluster must not carry
// them, ordered or not, or no chart using them could be installed at all.
// The key is spelled out here rather than taken from internal/sequencing,
// which reads it: every apply strips it, ordered or not, and the client
// that applies must not depend on the package that orders.
var unappliable = []string{"helm.sh/depends-on/resource-groups"}

// StripUnappliable removes from obj the annotations the API server would
// refuse, and tells whether it removed any.
func StripUnappliable(obj runtime.Object) bool {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	annotations := accessor.GetAnnotations()
	removed := false
	for _, key := range unappliable {
		if _, ok := annotations[key]; ok {
			delete(annotations, key)
			removed = true
		}
	}
	if removed {
		if len(annotations) == 0 {
			annotations = nil
		}
		accessor.SetAnnotations(annotations)
	}
	return removed
}
