package checkout

import (
	"io/fs"
	"syscall"
)

// statKey is what lstat says of a file that changes when its content
// does. ctime is the part no program can set: any write, chmod or utimes
// moves it to the file system's clock.
type statKey struct {
	size, mtime, ctime int64 // times in ns
	ino, dev           uint64
}

func statOf(info fs.FileInfo) statKey {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return statKey{}
	}
	return statKey{
		size:  st.Size,
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
		ino:   st.Ino,
		dev:   uint64(st.Dev), // uint32 on some architectures
	}
}

func (k statKey) known() bool { return k.ctime != 0 }
