package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/patch"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// releasePatcher writes a HelmRelease through Flux's patch helper, and
// remembers the object as the helper last wrote (or first read) it.
//
// Most reconciles of a settled fleet change nothing, or only record the
// handled reconcile request. For those the helper's whole-object diff (the
// object converted and marshalled twice, a merge patch computed, the whole
// object decoded from the response) was the largest part of a no-op
// reconcile's CPU (issue 32, docs/performance.md). The final write of such a
// reconcile sends the same merge patch the helper would send, built
// directly, or nothing at all.
type releasePatcher struct {
	// helper is made on the first write that needs it, from written: a
	// reconcile that writes nothing, or the handled request alone, does
	// not pay for its copy of the object.
	helper *patch.SerialPatcher
	client client.Client
	// status sends the handled-request write; by default through client.
	status statusWriter
	owner  string
	// written is the object as the API server holds it after this
	// reconcile's last write; nil once a write failed, when only the helper
	// knows what it still has to send.
	written *v2.HelmRelease
	// read is the object as the reconcile read it. It is written's first
	// value and shares its memory until the first whole-object write; a
	// handled-request write changes only lastHandledReconcileAt and the
	// resourceVersion in it, neither of which decisionState reads.
	read *v2.HelmRelease
}

func newReleasePatcher(obj *v2.HelmRelease, c client.Client, owner string) *releasePatcher {
	read := obj.DeepCopy()
	return &releasePatcher{client: c, status: clientStatusWriter{c}, owner: owner, written: read, read: read}
}

// statusWriter sends a patch to a HelmRelease's status subresource and
// returns the resourceVersion it left, reading nothing else of the answer.
type statusWriter interface {
	patchStatus(ctx context.Context, key client.ObjectKey, body []byte, fieldManager string) (resourceVersion string, err error)
}

// clientStatusWriter writes through a controller-runtime client, asking for
// metadata only. The client looks the kind's REST mapping up on every call.
type clientStatusWriter struct{ client.Client }

func (w clientStatusWriter) patchStatus(ctx context.Context, key client.ObjectKey, body []byte, fieldManager string) (string, error) {
	written := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: v2.GroupVersion.String(), Kind: helmv2.HelmReleaseKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
	}
	if err := w.Status().Patch(ctx, written, client.RawPatch(types.MergePatchType, body), client.FieldOwner(fieldManager)); err != nil {
		return "", err
	}
	return written.ResourceVersion, nil
}

// metadataStatusWriter writes through client-go's metadata client of the
// HelmRelease resource, which is fixed: no REST mapping per call (a few per
// cent of a no-op reconcile's CPU at 2,000 releases, docs/performance.md).
type metadataStatusWriter struct {
	releases metadata.Getter
}

// newMetadataStatusWriter writes through c's client of HelmReleases.
func newMetadataStatusWriter(c metadata.Interface) metadataStatusWriter {
	return metadataStatusWriter{releases: c.Resource(v2.GroupVersion.WithResource("helmreleases"))}
}

func (w metadataStatusWriter) patchStatus(ctx context.Context, key client.ObjectKey, body []byte, fieldManager string) (string, error) {
	written, err := w.releases.Namespace(key.Namespace).Patch(ctx, key.Name, types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: fieldManager}, "status")
	if err != nil {
		return "", err
	}
	return written.ResourceVersion, nil
}

// wroteWholeObject tells whether any write went through the helper: without
// one, every write sent lastHandledReconcileAt alone, and the status differs
// from the one read in that field at most.
func (p *releasePatcher) wroteWholeObject() bool {
	return p.helper != nil
}

// Patch writes every change of obj since the last write, through the helper.
func (p *releasePatcher) Patch(ctx context.Context, obj *v2.HelmRelease, opts ...patch.Option) error {
	p.ensureHelper()
	if err := p.helper.Patch(ctx, obj, opts...); err != nil {
		p.written = nil
		return err
	}
	p.written = obj.DeepCopy()
	return nil
}

// ensureHelper makes the helper, from the object as last written, unless
// it exists.
func (p *releasePatcher) ensureHelper() {
	if p.helper == nil {
		p.helper = patch.NewSerialPatcher(p.written, p.client)
	}
}

// pendingChange is what a write of obj would have to send.
type pendingChange int

const (
	noChange pendingChange = iota
	// handledRequestOnly: status.lastHandledReconcileAt alone.
	handledRequestOnly
	otherChanges
)

func (p *releasePatcher) pending(obj *v2.HelmRelease) pendingChange {
	w := p.written
	if w == nil {
		return otherChanges
	}
	if !sameValue(&obj.ObjectMeta, &w.ObjectMeta) || !sameValue(&obj.Spec, &w.Spec) {
		return otherChanges
	}
	status := obj.Status
	status.LastHandledReconcileAt = w.Status.LastHandledReconcileAt
	if !sameValue(&status, &w.Status) {
		return otherChanges
	}
	if obj.Status.LastHandledReconcileAt != w.Status.LastHandledReconcileAt {
		return handledRequestOnly
	}
	return noChange
}

// sameValue is apimachinery's semantic equality, tried after the plain
// reflect.DeepEqual: what is unchanged is almost always identical to the
// copy (the copy was made from it), and the plain comparison, which does
// not look up an equality function for each field, costs a third as much.
// What the plain comparison finds equal the semantic one does too, so the
// answer is the semantic one's. Pointers are compared by what
// they point at, and spare the copies that boxing the values would make.
func sameValue[T any](a, b *T) bool {
	return reflect.DeepEqual(a, b) || apiequality.Semantic.DeepEqual(a, b)
}

// PatchFinal is the last write of a reconcile: nothing when nothing changed,
// the handled request alone when only it changed, else the helper's write.
func (p *releasePatcher) PatchFinal(ctx context.Context, obj *v2.HelmRelease, opts ...patch.Option) error {
	switch p.pending(obj) {
	case noChange:
		return nil
	case handledRequestOnly:
		return p.writeHandledRequest(ctx, obj)
	default:
		return p.Patch(ctx, obj, opts...)
	}
}

// writeHandledRequest sends the merge patch the helper sends for a change of
// status.lastHandledReconcileAt alone: no resourceVersion, so it does not
// conflict with a write made since, as the helper's does not. The response is
// asked for as metadata only, as nothing else of it is read.
func (p *releasePatcher) writeHandledRequest(ctx context.Context, obj *v2.HelmRelease) error {
	body, err := json.Marshal(map[string]map[string]string{
		"status": {"lastHandledReconcileAt": obj.Status.LastHandledReconcileAt},
	})
	if err != nil {
		return fmt.Errorf("encoding the handled reconcile request: %w", err)
	}
	version, err := p.status.patchStatus(ctx, client.ObjectKeyFromObject(obj), body, p.owner)
	if err != nil {
		// The server still holds what was last written: the helper
		// takes over from there.
		p.ensureHelper()
		p.written = nil
		return err
	}
	obj.ResourceVersion = version
	// pending found everything else as last written: the copy needs only
	// what this write changed.
	p.written.Status.LastHandledReconcileAt = obj.Status.LastHandledReconcileAt
	p.written.ResourceVersion = version
	return nil
}
