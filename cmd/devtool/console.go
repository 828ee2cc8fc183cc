package main

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// console interleaves the output of devtool and its children on one writer,
// a whole line at a time, each line prefixed with the name of the process it
// came from ("[ingest]   ...").
type console struct {
	mu sync.Mutex
	w  io.Writer
}

// prefixWidth aligns the prefixes of the names devtool uses.
const prefixWidth = len("[receiver] ")

// printf prints one line from the process called name.
func (c *console) printf(name, format string, args ...any) {
	c.line(name, fmt.Appendf(nil, format, args...))
}

// plain prints text as it is, with no prefix; for the banner.
func (c *console) plain(text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	io.WriteString(c.w, text)
}

func (c *console) line(name string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.w, "%-*s%s\n", prefixWidth, "["+name+"]", bytes.TrimRight(b, "\r\n"))
}

// writer returns a writer that prints what it is given line by line as
// coming from name. It is meant for a child's stdout and stderr together:
// exec.Cmd then writes to it from one goroutine at a time.
func (c *console) writer(name string) *lineWriter {
	return &lineWriter{c: c, name: name}
}

// maxLine bounds how much of a line without a newline is held back.
const maxLine = 64 << 10

// lineWriter buffers a partial line until its newline arrives.
type lineWriter struct {
	c    *console
	name string
	buf  []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.c.line(l.name, l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) >= maxLine {
		l.flush()
	}
	return len(p), nil
}

// flush prints what is left of an unfinished line.
func (l *lineWriter) flush() {
	if len(l.buf) > 0 {
		l.c.line(l.name, l.buf)
		l.buf = nil
	}
}
