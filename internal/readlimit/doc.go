// Package readlimit reads what a user hands Drover — a flow file, a config
// file, standard input — with a bound: never more than the limit plus one
// byte, a regular file's size checked before any of it is read, and FIFOs,
// devices, sockets and directories refused before they are opened, so that
// `controller submit /dev/zero` or a FIFO nobody writes fails at once with
// a clear error instead of exhausting memory or hanging.
//
// It must not know what the bytes mean.
package readlimit
