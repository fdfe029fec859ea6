package controller

import "testing"

func TestFoldNotices(t *testing.T) {
	c := &Controller{}
	a, unsubA := c.Subscribe()
	b, unsubB := c.Subscribe()
	defer unsubB()
	// A burst of commits is one notice, and never blocks the fold.
	for range 100 {
		c.notifier.notify()
	}
	for _, ch := range []<-chan struct{}{a, b} {
		select {
		case <-ch:
		default:
			t.Fatal("no notice")
		}
		select {
		case <-ch:
			t.Fatal("a burst gave two notices")
		default:
		}
	}
	unsubA()
	c.notifier.notify()
	select {
	case <-a:
		t.Fatal("a notice after unsubscribing")
	default:
	}
	if _, ok := <-b; !ok {
		t.Fatal("b closed")
	}
}
