package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/logger"
	"k8s.io/klog/v2"
)

// client-go reports through klog (a reflector that cannot list, a watch
// that broke, client-side throttling). Without its logger set, klog prints
// its own text lines ("E1128 12:00:00 …") among the controller's JSON,
// which log collectors and `flux logs` cannot parse. As upstream, they come
// out as JSON from the logger named "runtime".
func TestClientGoLogsInTheControllersEncoding(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	t.Cleanup(func() { os.Stderr = stderr })

	var opts options
	opts.logger = logger.Options{LogEncoding: "json", LogLevel: "info"}
	setLogger(opts)
	klog.ErrorS(errors.New("forbidden"), "failed to list *v1.ConfigMap")
	klog.Flush()
	os.Stderr = stderr
	w.Close()

	var lines []string
	scanner := bufio.NewScanner(r)
	for scanner.Scan() {
		lines = append(lines, scanner.Text())
	}
	if len(lines) == 0 {
		t.Fatal("klog wrote nothing to stderr")
	}
	for _, line := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("a line that is not JSON: %q", line)
			continue
		}
		if entry["logger"] != "runtime" || !strings.Contains(entry["msg"].(string), "failed to list") {
			t.Errorf("entry %v, want the klog message from the logger named runtime", entry)
		}
	}
}
