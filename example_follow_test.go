package proc_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/procvisor/proc"
)

// A client that wants every byte of a record registers a Follower and
// reads it to io.EOF: the pump waits a few milliseconds at most for a
// follower that keeps up, and one that falls further behind learns what
// it lost from Chunk.Lost. OutputTee is the lossless alternative that may
// hold the command without bound.
func ExampleProcess_Follow() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "echo line 1&& echo line 2&& echo line 3"})
	if err != nil {
		log.Fatal(err)
	}
	f, err := p.Follow(0, proc.FollowOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	buf := make([]byte, 64<<10)
	for {
		c, err := f.Read(ctx, buf)
		if c.Lost > 0 {
			fmt.Printf("[lost %d bytes]\n", c.Lost)
		}
		os.Stdout.Write(c.Data)
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("lost in all:", f.Stats().Lost)
	// Output:
	// line 1
	// line 2
	// line 3
	// lost in all: 0
}
