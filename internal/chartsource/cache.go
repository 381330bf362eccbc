package chartsource

import "k8s.io/apimachinery/pkg/types"

// The functions in this file expect s.mu to be held.

func (s *Source) lookup(key string) (*Chart, bool) {
	el, ok := s.entries[key]
	if !ok {
		return nil, false
	}
	s.lru.MoveToFront(el)
	return el.Value.(*Chart), true
}

// insert evicts the least recently used entries beyond the bound even when
// they are owned: their owners download again on their next Get.
func (s *Source) insert(key string, c *Chart) {
	if el, ok := s.entries[key]; ok {
		el.Value = c
		s.lru.MoveToFront(el)
		return
	}
	s.entries[key] = s.lru.PushFront(c)
	for s.lru.Len() > s.maxEntries {
		oldest := s.lru.Back()
		s.lru.Remove(oldest)
		delete(s.entries, oldest.Value.(*Chart).Digest)
	}
}

func (s *Source) remove(key string) {
	if el, ok := s.entries[key]; ok {
		s.lru.Remove(el)
		delete(s.entries, key)
	}
}

// use records that owner now uses the digest key and releases the digest it
// used before.
func (s *Source) use(owner types.NamespacedName, key string) {
	prev, had := s.owners[owner]
	if had && prev == key {
		return
	}
	s.owners[owner] = key
	s.users[key]++
	if had {
		s.release(prev)
	}
}

func (s *Source) release(key string) {
	s.users[key]--
	if s.users[key] > 0 {
		return
	}
	delete(s.users, key)
	s.remove(key)
}
