//go:build unix

package verifiertest_test

// This file is what a user of fencelock would write to fence a store that
// fencelock does not ship a verifier for, here a directory of JSON files on
// a shared disk, and how they would prove it with the conformance kit.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// fileStore keeps each resource in its own JSON file: its data (here a log
// of entries) together with its high-water, so that one atomic rename
// writes both. An flock on a side file serialises the writers of one
// resource, across processes.
type fileStore struct {
	dir string
	// broken, in the kit's self-test only, names how Reset is broken:
	// "noop" changes nothing, "raise" only raises the high-water.
	broken string
}

type fileRecord struct {
	Resource string   `json:"resource"`
	Lock     string   `json:"lock,omitempty"`
	Seq      uint64   `json:"seq"`
	Holder   string   `json:"holder"`
	Log      []string `json:"log"`
}

var (
	_ verifier.Verifier = fileStore{}
	_ verifier.Mover    = fileStore{}
	_ verifier.Resetter = fileStore{}
)

func (s fileStore) path(resource string) string {
	sum := sha256.Sum256([]byte(resource))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:]))
}

// locked runs fn with resource's file locked, waiting for the lock until
// ctx ends.
func (s fileStore) locked(ctx context.Context, resource string, fn func(rec *fileRecord) (write bool, err error)) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", verifier.ErrInvalid)
	}
	if err := verifier.ValidateResource(resource); err != nil {
		return err
	}
	p := s.path(resource)
	lf, err := os.OpenFile(p+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	for {
		err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)

	rec, err := s.read(resource)
	if err != nil {
		return err
	}
	write, err := fn(&rec)
	if err != nil || !write {
		return err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	// Write a new file, sync it, rename it over the old one and sync the
	// directory: after a crash the record is the old one or the new one,
	// and an accepted high-water does not go back.
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return err
	}
	d, err := os.Open(s.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (s fileStore) read(resource string) (fileRecord, error) {
	rec := fileRecord{Resource: resource}
	b, err := os.ReadFile(s.path(resource))
	if errors.Is(err, fs.ErrNotExist) {
		return rec, nil
	}
	if err != nil {
		return rec, err
	}
	return rec, json.Unmarshal(b, &rec)
}

// check applies the acceptance rule to rec and, when tok is accepted,
// raises its high-water.
func check(rec *fileRecord, tok fence.Token) error {
	if rec.Lock != "" && rec.Lock != tok.Key {
		return &verifier.ForeignError{Resource: rec.Resource, Token: tok, Lock: rec.Lock}
	}
	if rec.Seq > tok.Seq || rec.Seq == tok.Seq && rec.Holder != tok.Holder {
		return &verifier.StaleError{Resource: rec.Resource, Token: tok, Highest: rec.Seq, HighestHolder: rec.Holder}
	}
	rec.Lock, rec.Seq, rec.Holder = tok.Key, tok.Seq, tok.Holder
	return nil
}

// Append adds entry to resource's log if tok is accepted, with the raised
// high-water, in one rename.
func (s fileStore) Append(ctx context.Context, resource string, tok fence.Token, entry string) error {
	if err := tok.Validate(); err != nil {
		return err
	}
	return s.locked(ctx, resource, func(rec *fileRecord) (bool, error) {
		if err := check(rec, tok); err != nil {
			return false, err
		}
		rec.Log = append(rec.Log, entry)
		return true, nil
	})
}

func (s fileStore) Claim(ctx context.Context, resource string, tok fence.Token) error {
	if err := tok.Validate(); err != nil {
		return err
	}
	return s.locked(ctx, resource, func(rec *fileRecord) (bool, error) { return true, check(rec, tok) })
}

func (s fileStore) Move(ctx context.Context, resource, from, to string) error {
	if err := verifier.ValidateMove(resource, from, to); err != nil {
		return err
	}
	return s.locked(ctx, resource, func(rec *fileRecord) (bool, error) {
		if rec.Lock != "" && rec.Lock != from {
			return false, &verifier.ForeignError{Resource: resource, Token: fence.Token{Key: from}, Lock: rec.Lock}
		}
		rec.Lock, rec.Seq, rec.Holder = to, 0, ""
		return true, nil
	})
}

// Reset sets the resource's high-water and lock to to's, whatever they were.
func (s fileStore) Reset(ctx context.Context, resource string, to fence.Token) error {
	if err := verifier.ValidateReset(resource, to); err != nil {
		return err
	}
	return s.locked(ctx, resource, func(rec *fileRecord) (bool, error) {
		switch {
		case s.broken == "noop":
			return false, nil
		case s.broken == "raise" && to.Seq < rec.Seq:
			return false, nil
		}
		rec.Lock, rec.Seq, rec.Holder = to.Key, to.Seq, to.Holder
		return true, nil
	})
}

func TestFileStoreConformance(t *testing.T) {
	verifiertest.Run(t, fileHarness(fileStore{dir: t.TempDir()}))
}

// fileHarness adapts s to the kit.
func fileHarness(s fileStore) verifiertest.Harness {
	errDiskFull := errors.New("disk full")
	return verifiertest.Harness{
		V: s,
		Highest: func(ctx context.Context, resource string) (uint64, string, error) {
			rec, err := s.read(resource)
			return rec.Seq, rec.Holder, err
		},
		Write: func(ctx context.Context, resource string, tok fence.Token) error {
			return s.Append(ctx, resource, tok, tok.String())
		},
		Log: func(ctx context.Context, resource string) ([]fence.Token, error) {
			rec, err := s.read(resource)
			if err != nil {
				return nil, err
			}
			toks := make([]fence.Token, len(rec.Log))
			for i, e := range rec.Log {
				if toks[i], err = fence.Parse(e); err != nil {
					return nil, err
				}
			}
			return toks, nil
		},
		FailWrite: func(ctx context.Context, resource string, tok fence.Token) error {
			if err := tok.Validate(); err != nil {
				return err
			}
			return s.locked(ctx, resource, func(rec *fileRecord) (bool, error) {
				if err := check(rec, tok); err != nil {
					return false, err
				}
				return false, errDiskFull
			})
		},
	}
}
