package membudget

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestBudget(t *testing.T) {
	b := New(100)
	if err := b.TryReserve("a", 60); err != nil {
		t.Fatal(err)
	}
	err := b.TryReserve("request body", 50)
	var ee *ExhaustedError
	if !errors.As(err, &ee) || !errors.Is(err, ErrExhausted) ||
		err.Error() != "request body needs 50 bytes: 60 of memory_budget (100 bytes) in use; retry later" {
		t.Fatalf("over the limit: %v", err)
	}
	b.Reserve(70) // memory already held may pass the limit
	if err := b.TryReserve("x", 1); err == nil {
		t.Fatal("reserved past the limit")
	}
	b.Release(70)
	b.SetLimit(200)
	if err := b.TryReserve("b", 140); err != nil {
		t.Fatal(err)
	}
	if used, peak, limit := b.Stats(); used != 200 || peak != 200 || limit != 200 {
		t.Fatalf("stats %d %d %d", used, peak, limit)
	}
	b.Release(200)
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "release of 1 bytes with 0 reserved") {
				t.Fatalf("over-release: %v", r)
			}
		}()
		b.Release(1)
	}()
	var nilBudget *Budget
	if err := nilBudget.TryReserve("x", 1<<40); err != nil {
		t.Fatal(err)
	}
	nilBudget.Release(1 << 40)
}

// TestBudgetConcurrent: concurrent reservations never pass the limit.
func TestBudgetConcurrent(t *testing.T) {
	b := New(1000)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				if b.TryReserve("x", 300) == nil {
					if used, _, _ := b.Stats(); used > 1000 {
						t.Errorf("used %d", used)
					}
					b.Release(300)
				}
			}
		}()
	}
	wg.Wait()
	if used, peak, _ := b.Stats(); used != 0 || peak > 900 {
		t.Fatalf("used %d peak %d", used, peak)
	}
}
