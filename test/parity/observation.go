package parity

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// ConditionTypes are the HelmRelease conditions an Observation records,
// in the order the table shows them.
var ConditionTypes = []string{"Ready", "Released", "Remediated", "TestSuccess", "Stalled", "Drifted"}

// Observation is what one side showed once a step settled.
type Observation struct {
	// Conditions is "status/reason" by condition type, "-" when absent.
	Conditions     map[string]string `json:"conditions"`
	StalledMessage string            `json:"stalledMessage,omitempty"`
	// The failure counters of the HelmRelease's status.
	InstallFailures int64  `json:"installFailures"`
	UpgradeFailures int64  `json:"upgradeFailures"`
	Failures        int64  `json:"failures"`
	LastAction      string `json:"lastAction,omitempty"`
	// ObservedGeneration is "current" when status.observedGeneration is
	// the HelmRelease's generation, else "behind": what kstatus, health
	// checks and dependsOn read.
	ObservedGeneration string `json:"observedGeneration,omitempty"`
	// History is status.history: version, status, chart and values
	// digest of each entry; Storage the status of each Helm storage
	// revision.
	History []string `json:"history,omitempty"`
	Storage []string `json:"storage,omitempty"`
	// Hooks are the hooks Helm recorded for the latest revision, with the
	// phase of their last run; Objects the live objects of the latest
	// revision; Recreated those of the live objects and hooks that have
	// another uid than after the previous step.
	Hooks []string `json:"hooks,omitempty"`
	// HooksRun are the hooks of the latest revision that ran for its
	// action (LastAction), "phase Kind/name" in the order they started:
	// what a plan's hooks are checked against (ComparePlan). Not compared
	// between the sides, whose Hooks already differ when the runs do.
	HooksRun  []string `json:"hooksRun,omitempty"`
	Objects   []string `json:"objects,omitempty"`
	Recreated []string `json:"recreated,omitempty"`
	// Events are the HelmRelease's events as "Type/Reason", each once.
	Events []string `json:"events,omitempty"`
	// Leftovers is what is left of the release once it is uninstalled.
	Leftovers []string `json:"leftovers,omitempty"`
}

// Field is one compared field of an Observation.
type Field struct{ Name, Value string }

// Fields are the observation's compared fields, in table order.
func (o Observation) Fields() []Field {
	out := make([]Field, 0, len(ConditionTypes)+12)
	for _, typ := range ConditionTypes {
		value := o.Conditions[typ]
		if value == "" {
			value = "-"
		}
		out = append(out, Field{typ, value})
	}
	return append(out,
		Field{"Stalled message", o.StalledMessage},
		Field{"failures", fmt.Sprintf("install %d upgrade %d total %d", o.InstallFailures, o.UpgradeFailures, o.Failures)},
		Field{"lastAttemptedReleaseAction", o.LastAction},
		Field{"observedGeneration", o.ObservedGeneration},
		Field{"history", strings.Join(o.History, "; ")},
		Field{"storage", strings.Join(o.Storage, "; ")},
		Field{"hooks", strings.Join(o.Hooks, "; ")},
		Field{"objects", strings.Join(o.Objects, "; ")},
		Field{"recreated", strings.Join(o.Recreated, "; ")},
		Field{"events", strings.Join(o.Events, " ")},
		Field{"leftovers", strings.Join(o.Leftovers, "; ")},
	)
}

// Recreated lists, sorted, the names present in both before and after
// (name to uid) whose uid changed: objects deleted and made again
// between two steps.
func Recreated(before, after map[string]string) []string {
	var out []string
	for name, uid := range after {
		if old, ok := before[name]; ok && old != uid {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Step is the observation after one named step.
type Step struct {
	Name        string      `json:"name"`
	Observation Observation `json:"observation"`
}

// Run is one side's run of a scenario: the mode it ran in ("upstream"
// for upstream helm-controller) and its steps, in order.
type Run struct {
	Mode  string `json:"mode"`
	Steps []Step `json:"steps"`
}

// ReadRun reads a run recorded with Write.
func ReadRun(file string) (Run, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Run{}, fmt.Errorf("reading a recorded run: %w", err)
	}
	var run Run
	if err := json.Unmarshal(data, &run); err != nil {
		return Run{}, fmt.Errorf("reading the recorded run %s: %w", file, err)
	}
	return run, nil
}

// Write records the run as indented JSON.
func (r Run) Write(file string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("recording the run: %w", err)
	}
	if err := os.WriteFile(file, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("recording the run: %w", err)
	}
	return nil
}
