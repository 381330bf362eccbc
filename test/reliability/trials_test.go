package reliability

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
)

// What every fault test shares: the seed of its random moments, the
// RELIABILITY_CELLS filter, running cells side by side into rows, and
// counting remediations.

// trialSeed is RELIABILITY_SEED, or a new seed, logged so that a run's
// random moments can be replayed.
func trialSeed(t *testing.T, moments string) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("RELIABILITY_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("random seed %d (RELIABILITY_SEED reproduces the %s)", seed, moments)
	return seed
}

// envFilter is RELIABILITY_CELLS, which picks the cells whose name
// contains it.
func envFilter() string { return strings.TrimSpace(os.Getenv("RELIABILITY_CELLS")) }

// selectCells keeps the cells RELIABILITY_CELLS picks.
func selectCells[C fmt.Stringer](all []C) []C {
	only := envFilter()
	if only == "" {
		return all
	}
	return slices.DeleteFunc(all, func(c C) bool { return !strings.Contains(c.String(), only) })
}

// runTrials runs run for every cell, at most parallel at a time, then
// records each cell's row and gives it a subtest that fails when one of
// its runs broke an invariant.
func runTrials[C fmt.Stringer](t *testing.T, cells []C, parallel int, run func(i int, c C) row) {
	rows := make([]row, len(cells))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(parallel, 1))
	for i, c := range cells {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			rows[i] = run(i, c)
		})
	}
	wg.Wait()
	for i, c := range cells {
		report.add(rows[i])
		t.Run(c.String(), func(t *testing.T) {
			if len(rows[i].Failures) > 0 {
				t.Errorf("%d of %d runs broke an invariant:\n%s", len(rows[i].Failures), rows[i].Runs, strings.Join(rows[i].Failures, "\n"))
			}
			t.Log(rows[i].Note)
		})
	}
}

// remediationEvents counts the rollbacks and uninstalls the controller
// reported for the release ns/name, each distinct report once: a
// remediation that finished just before a kill may be reported again by
// the next controller when it records it, which is one remediation, not
// two. A further remediation reports another revision, so its message
// differs. It returns -1 when the events cannot be read.
func remediationEvents(ns, name string) int {
	events, err := env.Events(context.Background(), ns, name)
	if err != nil {
		return -1
	}
	seen := map[string]bool{}
	for _, e := range events {
		switch e.Reason {
		case helmv2.RollbackSucceededReason, helmv2.RollbackFailedReason,
			helmv2.UninstallSucceededReason, helmv2.UninstallFailedReason:
			seen[e.Reason+"\x00"+e.Message] = true
		}
	}
	return len(seen)
}
