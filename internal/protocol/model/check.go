package model

// initial is every client idle before its first Acquire, asking for its
// N (a semaphore's), on an empty server, at tick 0.
func (m *machine) initial() state {
	s := state{quiet: -1}
	for i := range maxSlots {
		s.srv.slot[i].holder, s.strand[i], s.free[i] = noHolder, -1, -1
	}
	for c := range m.cfg.Clients {
		s.cl[c].n = m.cfg.permitsOf(c)
	}
	m.canon(&s)
	return s
}

// node is one visited state in the search tree: how it was first reached.
type node struct {
	parent int32
	act    action
}

// level holds the canonical bytes of one search level's states.
type level struct {
	data []byte
	end  []int32 // end offset of each state in data
	id   []int32 // its node
}

func (l *level) add(b []byte, id int32) {
	l.data = append(l.data, b...)
	l.end = append(l.end, int32(len(l.data)))
	l.id = append(l.id, id)
}

func (l *level) get(i int) []byte {
	start := int32(0)
	if i > 0 {
		start = l.end[i-1]
	}
	return l.data[start:l.end[i]]
}

// Check explores every state reachable within cfg's bounds, breadth first,
// and stops at the first violation of a property. Breadth first makes the
// counterexample one of the shortest there are (in steps, ticks included).
func Check(cfg Config) (Result, error) {
	cfg, err := cfg.norm()
	if err != nil {
		return Result{}, err
	}
	m := &machine{cfg: cfg}
	s0 := m.initial()
	var res Result
	if bad := m.check(&s0); bad != nil {
		return m.fail(res, bad, nil), nil
	}
	nodes := []node{{parent: -1}}
	key := m.symKey(&s0, nil)
	seen := newHashSet()
	seen.add(hash64(key))
	var cur level
	cur.add(m.encode(&s0, nil), 0)
	var buf []byte
	var acts []action
	for len(cur.id) > 0 {
		var next level
		for i := range cur.id {
			s := m.decode(cur.get(i))
			acts = m.actions(&s, acts[:0])
			for _, a := range acts {
				res.Transitions++
				ns, stepBad := m.apply(s, a)
				var bad *violation
				if stepBad == nil {
					key = m.symKey(&ns, key[:0])
					if !seen.add(hash64(key)) {
						continue
					}
					bad = m.check(&ns)
					nodes = append(nodes, node{parent: cur.id[i], act: a})
					buf = m.encode(&ns, buf[:0])
					next.add(buf, int32(len(nodes)-1))
				} else if bad = m.check(&ns); bad == nil {
					bad = stepBad // (a) or (c) first when the step broke both
				}
				if bad != nil {
					res.States = seen.n
					return m.fail(res, bad, m.path(nodes, cur.id[i], a)), nil
				}
			}
		}
		if len(next.id) > 0 {
			res.Depth++
		}
		cur = next
	}
	res.States = seen.n
	return m.counted(res), nil
}

// path is the actions from the initial state to node id, then a.
func (m *machine) path(nodes []node, id int32, a action) []action {
	var p []action
	for ; id > 0; id = nodes[id].parent {
		p = append(p, nodes[id].act)
	}
	for i, j := 0, len(p)-1; i < j; i, j = i+1, j-1 {
		p[i], p[j] = p[j], p[i]
	}
	return append(p, a)
}

func (m *machine) fail(res Result, bad *violation, path []action) Result {
	res.Property, res.Violation, res.Depth = bad.prop, bad.what, len(path)
	res = m.counted(res)
	res.Trace = m.trace(path)
	return res
}

// counted copies the event counts into res (before a trace replay adds
// its own).
func (m *machine) counted(res Result) Result {
	res.Events = map[string]int{}
	for e, n := range m.events {
		res.Events[eventNames[e]] = n
	}
	return res
}
