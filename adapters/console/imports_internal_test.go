package console

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/application"
)

// TestImportJobsAreBounded: an instance keeps at most maxImportJobs; a new one evicts the
// oldest finished job, is refused while every kept job is running, and a finished job is
// forgotten importJobTTL after it ended.
func TestImportJobsAreBounded(t *testing.T) {
	clock := memory.NewFakeClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	js := newImportJobs(clock)
	jobs := make([]*importJob, maxImportJobs)
	for i := range jobs {
		jobs[i] = &importJob{ID: fmt.Sprintf("job-%02d", i), Product: 1, Started: clock.Now()}
		if err := js.add(jobs[i]); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	if err := js.add(&importJob{ID: "one-too-many", Product: 1}); !errors.Is(err, errTooManyImports) {
		t.Fatalf("a job over the bound while all run: %v", err)
	}
	if got := len(js.running(1)); got != maxImportJobs {
		t.Fatalf("%d running, want %d", got, maxImportJobs)
	}
	jobs[5].finish(application.ImportReport{}, nil, clock.Now())
	clock.Advance(time.Minute)
	jobs[9].finish(application.ImportReport{}, nil, clock.Now())
	if err := js.add(&importJob{ID: "next", Product: 1}); err != nil {
		t.Fatal(err)
	}
	if js.get("job-05", 1) != nil || js.get("job-09", 1) == nil || js.get("next", 1) == nil {
		t.Fatal("the oldest finished job was not the one evicted")
	}
	if js.get("job-09", 2) != nil {
		t.Fatal("a job is found under another product")
	}
	clock.Advance(importJobTTL)
	if js.get("job-09", 1) == nil {
		t.Fatal("a job forgotten before importJobTTL passed")
	}
	clock.Advance(time.Second)
	if js.get("job-09", 1) != nil || js.get("job-10", 1) == nil {
		t.Fatal("a finished job kept past importJobTTL, or a running one forgotten")
	}
}
