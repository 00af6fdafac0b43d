package model

import "math/rand/v2"

// Random walks reach deeper than the exhaustive search (longer horizons,
// bigger fault budgets) at the cost of completeness. A walk is a function
// of its seed alone: the enabled actions come in a fixed order and the
// choice among them comes from a PCG seeded with it, so a failing seed
// replays the same trace exactly.

// Walk runs one random walk from the initial state until nothing is
// enabled, maxSteps steps are taken, or a property breaks. Its Result
// always has the whole trace; States counts the steps.
func Walk(cfg Config, seed uint64, maxSteps int) (Result, error) {
	cfg, err := cfg.norm()
	if err != nil {
		return Result{}, err
	}
	m := &machine{cfg: cfg}
	path, bad := m.walk(seed, maxSteps)
	res := Result{States: len(path), Transitions: len(path), Depth: len(path)}
	if bad != nil {
		return m.fail(res, bad, path), nil
	}
	res = m.counted(res)
	res.Trace = m.trace(path)
	return res, nil
}

// Walks runs n walks with seeds seed, seed+1, ... and returns the first
// violation found (its Trace that walk's), with the seed that found it;
// otherwise the total of steps taken.
func Walks(cfg Config, seed uint64, n, maxSteps int) (Result, uint64, error) {
	cfg, err := cfg.norm()
	if err != nil {
		return Result{}, 0, err
	}
	m := &machine{cfg: cfg}
	var total Result
	for i := range uint64(n) {
		path, bad := m.walk(seed+i, maxSteps)
		total.States += len(path)
		total.Transitions += len(path)
		total.Depth = max(total.Depth, len(path))
		if bad != nil {
			return m.fail(total, bad, path), seed + i, nil
		}
	}
	return m.counted(total), 0, nil
}

func (m *machine) walk(seed uint64, maxSteps int) ([]action, *violation) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	s := m.initial()
	var path, acts []action
	for len(path) < maxSteps {
		acts = m.actions(&s, acts[:0])
		if len(acts) == 0 {
			break
		}
		a := acts[rng.IntN(len(acts))]
		path = append(path, a)
		next, stepBad := m.apply(s, a)
		if bad := m.check(&next); bad != nil {
			return path, bad
		}
		if bad := stepBad; bad != nil {
			return path, bad
		}
		s = next
	}
	return path, nil
}
