package devlocal

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// Console interleaves the output of devtool and its children on one writer,
// a whole line at a time, each line prefixed with the name of the process it
// came from ("[ingest]   ...").
type Console struct {
	mu sync.Mutex
	w  io.Writer
}

// NewConsole returns a console that prints on w.
func NewConsole(w io.Writer) *Console { return &Console{w: w} }

// prefixWidth aligns the prefixes of the names devtool uses.
const prefixWidth = len("[receiver] ")

// Printf prints one line from the process called name.
func (c *Console) Printf(name, format string, args ...any) {
	c.line(name, fmt.Appendf(nil, format, args...))
}

// Plain prints text as it is, with no prefix; for the banner.
func (c *Console) Plain(text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	io.WriteString(c.w, text)
}

func (c *Console) line(name string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.w, "%-*s%s\n", prefixWidth, "["+name+"]", bytes.TrimRight(b, "\r\n"))
}

// Writer returns a writer that prints what it is given line by line as
// coming from name. It is meant for a child's stdout and stderr together:
// exec.Cmd then writes to it from one goroutine at a time.
func (c *Console) Writer(name string) *LineWriter {
	return &LineWriter{c: c, name: name}
}

// maxLine bounds how much of a line without a newline is held back.
const maxLine = 64 << 10

// LineWriter buffers a partial line until its newline arrives.
type LineWriter struct {
	c    *Console
	name string
	buf  []byte
}

func (l *LineWriter) Write(p []byte) (int, error) {
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
		l.Flush()
	}
	return len(p), nil
}

// Flush prints what is left of an unfinished line.
func (l *LineWriter) Flush() {
	if len(l.buf) > 0 {
		l.c.line(l.name, l.buf)
		l.buf = nil
	}
}
