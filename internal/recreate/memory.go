package recreate

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Memory keeps the objects a policy recreated, by the UID of the object
// it created and the manifest it created it from. An object that is
// refused again with the same UID and manifest was changed after its
// creation by something else (a webhook that mutates only creations, an
// operator): recreating it again would only loop. It lives as long as the
// process; after a restart such an object is recreated at most once more.
// Safe for concurrent use.
type Memory struct {
	mu      sync.Mutex
	entries map[types.UID]remembered
	// order holds the UIDs oldest first, to bound the memory.
	order []types.UID
}

type remembered struct {
	manifest [sha256.Size]byte
	at       time.Time
}

// memoryLimit bounds how many recreated objects are kept; the oldest go.
const memoryLimit = 4096

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{entries: map[types.UID]remembered{}}
}

// remember records that uid was created from desired.
func (m *Memory) remember(uid types.UID, desired *unstructured.Unstructured) {
	if m == nil || uid == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entries[uid]; !ok {
		m.order = append(m.order, uid)
	}
	m.entries[uid] = remembered{manifest: digest(desired), at: time.Now()}
	for len(m.order) > memoryLimit {
		delete(m.entries, m.order[0])
		m.order = m.order[1:]
	}
}

// recreated tells when the object with uid was created by a recreate from
// the same desired manifest; zero when it was not.
func (m *Memory) recreated(uid types.UID, desired *unstructured.Unstructured) time.Time {
	if m == nil {
		return time.Time{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[uid]
	if !ok || e.manifest != digest(desired) {
		return time.Time{}
	}
	return e.at
}

func digest(obj *unstructured.Unstructured) [sha256.Size]byte {
	b, _ := json.Marshal(obj.Object) // maps marshal with sorted keys
	return sha256.Sum256(b)
}
