package framework

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
)

// ReconcilerError is one "Reconciler error" line of a controller's JSON
// log: a reconcile that returned an error, counted by
// controller_runtime_reconcile_errors_total.
type ReconcilerError struct {
	Namespace, Name string
	Error           string
}

// ReconcilerErrors returns the reconcile errors in the logs of every
// process of c, oldest first. Lines that are not JSON (the console
// encoding) are skipped.
func (c *Controller) ReconcilerErrors() ([]ReconcilerError, error) {
	text, err := c.Log()
	if err != nil {
		return nil, err
	}
	var out []ReconcilerError
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"Reconciler error"`)) {
			continue
		}
		var entry struct {
			Msg       string `json:"msg"`
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
			Error     string `json:"error"`
		}
		if json.Unmarshal(line, &entry) != nil || entry.Msg != "Reconciler error" {
			continue
		}
		out = append(out, ReconcilerError{Namespace: entry.Namespace, Name: entry.Name, Error: entry.Error})
	}
	return out, sc.Err()
}
