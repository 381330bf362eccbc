package framework

import (
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The oracle holds this controller to its promises, not upstream
// helm-controller, which the parity and takeover tests run beside it and
// whose known lies (a failed Job that its TTL deleted counted as complete)
// are listed differences. Every process start is recorded by shard with
// the binary it ran, so that a Ready=True written while upstream's binary
// ran the HelmRelease's shard is logged, not failed.

// upstreamBinaryName starts the file name of upstream's binary in the tool
// cache (UpstreamBinary): the link, or the versioned file it resolves to.
const upstreamBinaryName = "helm-controller-upstream"

type binaryStart struct {
	at       time.Time
	upstream bool
}

var shardStarts = struct {
	sync.Mutex
	byShard map[string][]binaryStart
}{byShard: map[string][]binaryStart{}}

// recordStart notes that a process of binary started for shard.
func recordStart(shard, binary string) {
	shardStarts.Lock()
	defer shardStarts.Unlock()
	shardStarts.byShard[shard] = append(shardStarts.byShard[shard],
		binaryStart{at: time.Now(), upstream: strings.HasPrefix(filepath.Base(binary), upstreamBinaryName)})
}

// upstreamRan tells whether the last process started for shard before at
// was upstream's binary.
func upstreamRan(shard string, at time.Time) bool {
	shardStarts.Lock()
	defer shardStarts.Unlock()
	upstream := false
	for _, s := range shardStarts.byShard[shard] {
		if s.at.After(at) {
			break
		}
		upstream = s.upstream
	}
	return upstream
}
