package drift

import (
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	wjsondiff "github.com/wI2L/jsondiff"
)

// Describe lists the deleted and changed objects of set, one per line, as
// "Kind/namespace/name deleted" or "Kind/namespace/name changed (1 added,
// 2 replaced, 0 removed)", counting the JSON patch operations that would
// restore the object. It is empty when nothing drifted.
func Describe(set jsondiff.DiffSet) string {
	var lines []string
	for _, d := range Drifted(set) {
		name := objectName(d)
		if d.Type == jsondiff.DiffTypeCreate {
			lines = append(lines, name+" deleted")
			continue
		}
		var added, replaced, removed int
		for _, op := range d.Patch {
			switch op.Type {
			case wjsondiff.OperationAdd:
				added++
			case wjsondiff.OperationReplace:
				replaced++
			case wjsondiff.OperationRemove:
				removed++
			}
		}
		lines = append(lines, fmt.Sprintf("%s changed (%d added, %d replaced, %d removed)", name, added, replaced, removed))
	}
	return strings.Join(lines, "\n")
}

// Count returns how many objects of set drifted and how many were left
// out by the driftDetection label or annotation or a whole-object ignore
// rule.
func Count(set jsondiff.DiffSet) (drifted, excluded int) {
	for _, d := range set {
		switch {
		case d == nil:
		case d.Type == jsondiff.DiffTypeCreate, d.Type == jsondiff.DiffTypeUpdate:
			drifted++
		case d.Type == jsondiff.DiffTypeExclude:
			excluded++
		}
	}
	return drifted, excluded
}

// DescribeChanges lists what a correction did, one object per line, as
// "Kind/namespace/name created" or "... configured"; objects that needed
// nothing are left out.
func DescribeChanges(changes *ssa.ChangeSet) string {
	if changes == nil {
		return ""
	}
	var lines []string
	for _, e := range changes.Entries {
		if e.Action == ssa.UnchangedAction || e.Action == ssa.SkippedAction {
			continue
		}
		lines = append(lines, e.String())
	}
	return strings.Join(lines, "\n")
}

func objectName(d *jsondiff.Diff) string {
	ns := d.GetNamespace()
	if ns == "" {
		return fmt.Sprintf("%s/%s", d.GroupVersionKind().Kind, d.GetName())
	}
	return fmt.Sprintf("%s/%s/%s", d.GroupVersionKind().Kind, ns, d.GetName())
}
