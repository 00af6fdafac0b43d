package fencegocron

import (
	"context"
	"fmt"
	"reflect"
	"runtime"

	"github.com/go-co-op/gocron/v2"

	"github.com/fencelock/fencelock/fence"
)

// newJob adds a job running task to s. named says whether the job must
// have a name of its own (gocron.WithName), which then names its lock on
// every host.
func newJob(s gocron.Scheduler, def gocron.JobDefinition, task func(context.Context) error,
	named bool, opts []gocron.JobOption) (gocron.Job, error) {
	if s == nil || def == nil {
		return nil, fmt.Errorf("%w: nil scheduler or job definition", ErrInvalid)
	}
	j, err := s.NewJob(def, gocron.NewTask(task), opts...)
	if err != nil {
		return nil, err
	}
	// gocron names a job after its function unless told otherwise; here
	// that function is ours, the same for every job.
	if named && j.Name() == runtime.FuncForPC(reflect.ValueOf(task).Pointer()).Name() {
		_ = s.RemoveJob(j.ID())
		return nil, fmt.Errorf("%w: the job needs a name (gocron.WithName): it names the job's lock on every host", ErrInvalid)
	}
	return j, nil
}

// runUnder runs fn with a context that carries tok (fence.FromContext) and
// ends when jobCtx (gocron's: the job removed, the scheduler shut down) or
// held (the lease or term the run holds) ends, with held's cause.
func runUnder(jobCtx, held context.Context, tok fence.Token, fn func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(jobCtx)
	defer cancel(nil)
	stop := context.AfterFunc(held, func() { cancel(context.Cause(held)) })
	defer stop()
	return fn(fence.NewContext(ctx, tok))
}
