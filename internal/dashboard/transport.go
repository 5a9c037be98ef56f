package dashboard

import (
	"io"
	"net/http"
	"sync"
)

// HandlerTransport carries requests to a handler in this process (the inventory API of the
// same controller-manager) without a socket, streaming the answer as it is written.
func HandlerTransport(h http.Handler) http.RoundTripper { return handlerTransport{h: h} }

type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			w.WriteHeader(http.StatusOK)
			_ = pw.Close()
		}()
		t.h.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-r.Context().Done():
		_ = pr.CloseWithError(r.Context().Err())
		return nil, r.Context().Err()
	}
	return &http.Response{Status: http.StatusText(w.code), StatusCode: w.code, Header: w.sent, Body: pr, Request: r,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, ContentLength: -1}, nil
}

// pipeResponse is an http.ResponseWriter whose body is read from the other end of a pipe.
type pipeResponse struct {
	header, sent http.Header
	code         int
	once         sync.Once
	body         *io.PipeWriter
	ready        chan struct{}
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(code int) {
	w.once.Do(func() {
		w.code, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// Flush sends the header; written bytes reach the reader as they are written.
func (w *pipeResponse) Flush() { w.WriteHeader(http.StatusOK) }
