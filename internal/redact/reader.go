package redact

import (
	"context"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// Reader is a client that keeps the data of every Secret read through it:
// the values a HelmRelease takes from Secrets, which the controller and
// `helm-controller plan` redact from what they say.
type Reader struct {
	client.Client
	// data is each Secret's data by name: valuesFrom reads Secrets of the
	// HelmRelease's own namespace only.
	data map[string]map[string][]byte
}

// Get reads obj and, when it is a Secret, keeps its data.
func (r *Reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if secret, ok := obj.(*corev1.Secret); ok {
		if r.data == nil {
			r.data = map[string]map[string][]byte{}
		}
		r.data[key.Name] = secret.Data
	}
	return nil
}

// Used are the values of the Secret keys refs (a spec.valuesFrom) read, so
// far as they were read, less public: words anyone who reads the
// HelmRelease sees anyway (its namespace, the release and chart names).
// Other keys of those Secrets never reach the values, and a public word
// blanked out would only make every message about the release unreadable.
func (r *Reader) Used(refs []meta.ValuesReference, public ...string) *Secrets {
	var used []map[string][]byte
	for _, ref := range refs {
		data, ok := r.data[ref.Name]
		if ref.Kind != "Secret" || !ok {
			continue
		}
		if value, ok := data[ref.GetValuesKey()]; ok {
			used = append(used, map[string][]byte{ref.GetValuesKey(): value})
		}
	}
	return FromData(used...).except(public)
}

// ForRelease is Used for the spec.valuesFrom of obj, with the names obj
// shows (its own, its release's, its chart's and its source's) public.
func (r *Reader) ForRelease(obj *v2.HelmRelease) *Secrets {
	public := []string{obj.Namespace, obj.Name, obj.GetReleaseName(), obj.GetReleaseNamespace(), obj.GetStorageNamespace()}
	if c := obj.Spec.Chart; c != nil {
		public = append(public, c.Spec.Chart, c.Spec.Version)
		// A template of kind OCIRepository has no sourceRef.
		if src := c.Spec.SourceRef; src != nil {
			public = append(public, src.Name)
		}
	}
	if ref := obj.Spec.ChartRef; ref != nil {
		public = append(public, ref.Name)
	}
	if cur := obj.Status.History.Latest(); cur != nil {
		public = append(public, cur.Name, cur.Namespace, cur.ChartName, cur.ChartVersion)
	}
	return r.Used(obj.Spec.ValuesFrom, public...)
}
