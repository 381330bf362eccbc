package action

import (
	"strconv"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
)

func TestWriteLogRecordsWhatStorageHolds(t *testing.T) {
	log := &WriteLog{}
	mem := driver.NewMemory()
	store := storage.Init(log.Wrap(mem))
	rel := func(v int, s common.Status) *releasev1.Release {
		return &releasev1.Release{Name: "web", Namespace: "apps", Version: v, Info: &releasev1.Info{Status: s}}
	}
	steps := []struct {
		name string
		do   func() error
		want string // "v<version> <status>" or "" for nothing
	}{
		{"nothing written yet", func() error { return nil }, ""},
		{"create", func() error { return store.Create(rel(1, common.StatusPendingInstall)) }, "v1 pending-install"},
		{"update", func() error { return store.Update(rel(1, common.StatusDeployed)) }, "v1 deployed"},
		{"a failed write is not recorded", func() error { return store.Create(rel(1, common.StatusFailed)) }, "v1 deployed"},
		{"create the next", func() error { return store.Create(rel(2, common.StatusPendingUpgrade)) }, "v2 pending-upgrade"},
		{"deleting an older one keeps it", func() error { _, err := store.Delete("web", 1); return err }, "v2 pending-upgrade"},
		{"deleting it forgets it", func() error { _, err := store.Delete("web", 2); return err }, ""},
	}
	for _, step := range steps {
		err := step.do()
		if err != nil && step.name != "a failed write is not recorded" {
			t.Fatalf("%s: %v", step.name, err)
		}
		got := ""
		if last := log.Last(); last != nil {
			got = "v" + strconv.Itoa(last.Version) + " " + last.Info.Status.String()
		}
		if got != step.want {
			t.Errorf("%s: Last = %q, want %q", step.name, got, step.want)
		}
	}
	// The record is a copy: later changes to the written object do not
	// show.
	r := rel(3, common.StatusPendingInstall)
	if err := store.Create(r); err != nil {
		t.Fatal(err)
	}
	r.Info.Status = common.StatusDeployed
	if got := log.Last().Info.Status; got != common.StatusPendingInstall {
		t.Errorf("Last status %s after the caller changed its object, want pending-install", got)
	}
}
