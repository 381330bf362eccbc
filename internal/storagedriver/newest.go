package storagedriver

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"

	"helm.sh/helm/v4/pkg/release"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Newest returns the newest stored revision of the release called name,
// or driver.ErrReleaseNotFound. Helm's way to it (History, then the
// highest version) decodes every revision, and a reconcile that finds the
// release in sync reads nothing else; here the records are ordered by
// their version label and only the newest one that decodes is decoded.
// Records that do not decode are passed over, as Helm's Query does; a
// record without a readable version label makes it decode them all.
func (s *Secrets) Newest(name string) (release.Releaser, error) {
	selector := labels.Set{"name": name, "owner": "helm"}.AsSelector().String()
	if s.heads != nil {
		return s.newestByHeads(selector)
	}
	return s.newestOfList(selector)
}

// newestOfList lists the whole records and decodes the newest.
func (s *Secrets) newestOfList(selector string) (release.Releaser, error) {
	list, err := s.impl.List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("query: failed to query with labels: %w", err)
	}
	items, ordered := byVersionLabel(list.Items)
	if !ordered {
		return newestDecoded(items)
	}
	for _, item := range items {
		if rls := s.decoded.get(item); rls != nil {
			return rls, nil
		}
		if rls, size, err := decodeRecord(item); err == nil {
			s.decoded.put(item, rls, size)
			return rls, nil
		}
	}
	return nil, driver.ErrReleaseNotFound
}

// newestByHeads lists the records' metadata, newest first by version
// label, and takes the first that the cache holds at its resourceVersion
// or that reads and decodes. A record deleted between the list and the
// read is passed over, as one that does not decode. Without version
// labels to order by, it falls back to the whole list.
func (s *Secrets) newestByHeads(selector string) (release.Releaser, error) {
	ctx := context.Background()
	list, err := s.heads.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("query: failed to query with labels: %w", err)
	}
	heads := make([]corev1.Secret, len(list.Items))
	for i := range list.Items {
		heads[i].ObjectMeta = list.Items[i].ObjectMeta
	}
	items, ordered := byVersionLabel(heads)
	if !ordered {
		return s.newestOfList(selector)
	}
	for _, head := range items {
		if rls := s.decoded.get(head); rls != nil {
			return rls, nil
		}
		item, err := s.impl.Get(ctx, head.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("get: failed to get %q: %w", head.Name, err)
		}
		if rls, size, err := decodeRecord(item); err == nil {
			s.decoded.put(item, rls, size)
			return rls, nil
		}
	}
	return nil, driver.ErrReleaseNotFound
}

// byVersionLabel returns items newest first by their version label, and
// whether every item had one.
func byVersionLabel(items []corev1.Secret) ([]*corev1.Secret, bool) {
	versions := make(map[*corev1.Secret]int, len(items))
	out := make([]*corev1.Secret, 0, len(items))
	for i := range items {
		v, err := strconv.Atoi(items[i].Labels["version"])
		if err != nil {
			return pointers(items), false
		}
		versions[&items[i]] = v
		out = append(out, &items[i])
	}
	slices.SortFunc(out, func(a, b *corev1.Secret) int { return versions[b] - versions[a] })
	return out, true
}

func pointers(items []corev1.Secret) []*corev1.Secret {
	out := make([]*corev1.Secret, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// newestDecoded decodes every record and returns the highest version.
func newestDecoded(items []*corev1.Secret) (release.Releaser, error) {
	var newest *releasev1.Release
	for _, item := range items {
		rls, _, err := decodeRecord(item)
		if err != nil {
			continue
		}
		if newest == nil || rls.Version > newest.Version {
			newest = rls
		}
	}
	if newest == nil {
		return nil, driver.ErrReleaseNotFound
	}
	return newest, nil
}

// gzipMagic starts every compressed record; Helm reads records written
// before it compressed them as plain JSON.
var gzipMagic = []byte{0x1f, 0x8b, 0x08}

// decodeRecord reads a release record as Helm's driver does (base64 of
// gzipped JSON, or of JSON) and gives it the Secret's labels. size is the
// length of the record's JSON.
func decodeRecord(item *corev1.Secret) (rls *releasev1.Release, size int, err error) {
	raw, err := base64.StdEncoding.DecodeString(string(item.Data["release"]))
	if err != nil {
		return nil, 0, err
	}
	if bytes.HasPrefix(raw, gzipMagic) {
		r, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, 0, err
		}
		defer r.Close()
		if raw, err = io.ReadAll(r); err != nil {
			return nil, 0, err
		}
	}
	rls = &releasev1.Release{}
	if err := json.Unmarshal(raw, rls); err != nil {
		return nil, 0, err
	}
	rls.Labels = item.Labels
	return rls, len(raw), nil
}
