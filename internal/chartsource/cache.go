package chartsource

import "k8s.io/apimachinery/pkg/types"

// The functions in this file expect s.mu to be held.

func (s *Source) lookup(key string) (*Chart, bool) {
	c, err := s.entries.Get(key)
	return c, err == nil
}

// insert lets the LRU bound evict the least recently used entries even
// when they are owned: their owners download again on their next Get.
func (s *Source) insert(key string, c *Chart) {
	// The LRU's Set cannot fail.
	_ = s.entries.Set(key, c)
}

// remove drops key; a key that is not cached (evicted already) is no error.
func (s *Source) remove(key string) {
	_ = s.entries.Delete(key)
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
