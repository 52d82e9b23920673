// Package httpbody reads HTTP bodies whose length is announced.
package httpbody

import "io"

// Read reads r to its end. size is the length the message announced (Content-Length; -1 or 0
// when unknown): when it is right, the body takes one allocation of its size, where io.ReadAll
// grows a buffer from 512 bytes (the stand-ins' requests and the clients' answers are read this
// way, several kilobytes each, ~30 a provisioning on each side). A body longer or shorter than
// announced is read all the same; limit (> 0) only bounds the size trusted for the allocation.
func Read(r io.Reader, size, limit int64) ([]byte, error) {
	if size <= 0 || (limit > 0 && size > limit) {
		return io.ReadAll(r)
	}
	// One byte more than announced, so that the end is seen without a second allocation.
	buf := make([]byte, size+1)
	n, err := io.ReadFull(r, buf)
	switch err {
	case io.ErrUnexpectedEOF, io.EOF:
		return buf[:n], nil
	case nil:
		rest, err := io.ReadAll(r)
		return append(buf, rest...), err
	default:
		return buf[:n], err
	}
}
