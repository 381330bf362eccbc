package action

import (
	"errors"
	"fmt"
	"sort"

	helmaction "helm.sh/helm/v4/pkg/action"
	releasecommon "helm.sh/helm/v4/pkg/release"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
)

// LastRelease returns the newest revision of the named release in storage,
// whatever its status. When there is none the error wraps
// driver.ErrReleaseNotFound.
func LastRelease(cfg *helmaction.Configuration, releaseName string) (*releasev1.Release, error) {
	if cfg != nil && cfg.Releases != nil {
		if reader := newestReaderOf(cfg.Releases.Driver); reader != nil {
			return newest(reader, releaseName)
		}
	}
	rels, err := History(cfg, releaseName)
	if err != nil {
		return nil, err
	}
	if len(rels) == 0 {
		return nil, fmt.Errorf("release %q: %w", releaseName, driver.ErrReleaseNotFound)
	}
	return rels[0], nil
}

// newestReader is a storage driver that reads the newest revision of a
// release without decoding the others (storagedriver.Secrets).
type newestReader interface {
	Newest(name string) (releasecommon.Releaser, error)
}

// newestReaderOf finds a newestReader in d or the drivers it wraps.
func newestReaderOf(d driver.Driver) newestReader {
	for d != nil {
		if r, ok := d.(newestReader); ok {
			return r
		}
		w, ok := d.(interface{ Unwrap() driver.Driver })
		if !ok {
			return nil
		}
		d = w.Unwrap()
	}
	return nil
}

func newest(reader newestReader, releaseName string) (*releasev1.Release, error) {
	item, err := reader.Newest(releaseName)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, fmt.Errorf("release %q: %w", releaseName, driver.ErrReleaseNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading newest revision of release %q: %w", releaseName, err)
	}
	rel, err := toV1(item, nil)
	if err != nil {
		return nil, err
	}
	if rel == nil {
		return nil, fmt.Errorf("release %q: %w", releaseName, driver.ErrReleaseNotFound)
	}
	return rel, nil
}

// History returns every stored revision of the named release, newest first.
// A release without revisions has an empty history, not an error.
func History(cfg *helmaction.Configuration, releaseName string) ([]*releasev1.Release, error) {
	if cfg == nil || cfg.Releases == nil {
		return nil, errors.New("action: configuration without release storage")
	}
	items, err := cfg.Releases.History(releaseName)
	if err != nil {
		if errors.Is(err, driver.ErrReleaseNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading history of release %q: %w", releaseName, err)
	}
	rels := make([]*releasev1.Release, 0, len(items))
	for _, item := range items {
		rel, err := toV1(item, nil)
		if err != nil {
			return nil, err
		}
		if rel != nil {
			rels = append(rels, rel)
		}
	}
	sort.SliceStable(rels, func(i, j int) bool { return rels[i].Version > rels[j].Version })
	return rels, nil
}

// toV1 converts what Helm returns to a v1 release, keeping err.
func toV1(rel releasecommon.Releaser, err error) (*releasev1.Release, error) {
	switch r := rel.(type) {
	case nil:
		return nil, err
	case *releasev1.Release:
		return r, err
	case releasev1.Release:
		return &r, err
	default:
		return nil, errors.Join(err, fmt.Errorf("unsupported Helm release type %T", rel))
	}
}
