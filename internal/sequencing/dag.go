package sequencing

import (
	"maps"
	"slices"
)

// layers sorts the nodes of a dependency graph (node → the nodes it needs)
// into layers: a node's layer comes after the layers of everything it
// needs, as early as that allows. Names in a layer are sorted, so the
// result does not depend on map order. Every needed node must be a key.
// A cycle is returned as a *CycleError without Chart and What.
func layers(needs map[string][]string) ([][]string, error) {
	waiting := make(map[string]int, len(needs))
	dependents := map[string][]string{}
	for node, deps := range needs {
		unique := uniqueSorted(deps)
		waiting[node] = len(unique)
		for _, d := range unique {
			dependents[d] = append(dependents[d], node)
		}
	}
	var out [][]string
	var ready []string
	for node, n := range waiting {
		if n == 0 {
			ready = append(ready, node)
		}
	}
	placed := 0
	for len(ready) > 0 {
		slices.Sort(ready)
		out = append(out, ready)
		placed += len(ready)
		var next []string
		for _, node := range ready {
			for _, d := range dependents[node] {
				if waiting[d]--; waiting[d] == 0 {
					next = append(next, d)
				}
			}
		}
		ready = next
	}
	if placed < len(needs) {
		return nil, &CycleError{Cycle: findCycle(needs, waiting)}
	}
	return out, nil
}

// findCycle returns one cycle among the nodes layers could not place,
// walking from the alphabetically first one along its first unplaced
// need until a node repeats.
func findCycle(needs map[string][]string, waiting map[string]int) []string {
	unplaced := func(node string) bool { return waiting[node] > 0 }
	var start string
	for _, node := range slices.Sorted(maps.Keys(needs)) {
		if unplaced(node) {
			start = node
			break
		}
	}
	seen := map[string]int{}
	var path []string
	for node := start; ; {
		if i, ok := seen[node]; ok {
			return append(path[i:], node)
		}
		seen[node] = len(path)
		path = append(path, node)
		i := slices.IndexFunc(uniqueSorted(needs[node]), unplaced)
		if i < 0 {
			return path // cannot happen: an unplaced node waits for one
		}
		node = uniqueSorted(needs[node])[i]
	}
}

func uniqueSorted(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}
