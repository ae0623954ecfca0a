package runner

import (
	"archive/tar"
	"archive/zip"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/sandbox"
)

// workspaceFS resolves workspace-relative paths for the files API. Every path
// is opened with openat2(RESOLVE_BENEATH) from the workspace folder, so ".."
// and links may move within the workspace but never out of it, and every call
// runs with the program account's file-system identity (account.do): what the
// runner reads or writes here, the program itself could.
type workspaceFS struct {
	root string
}

// resolveHow is how every workspace path is resolved: beneath the workspace,
// never through /proc magic links.
const resolveHow = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

// pathError turns a resolution error into the files API's sentinels.
func pathError(rel string, err error) error {
	switch {
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%w: %q leads out of the workspace", sandbox.ErrInvalidPath, rel)
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("%w: %q: too many links", sandbox.ErrInvalidPath, rel)
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%q: %w", rel, sandbox.ErrNoFile)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%q: %w", rel, sandbox.ErrNotFolder)
	case errors.Is(err, unix.EISDIR):
		return fmt.Errorf("%q: %w", rel, sandbox.ErrIsFolder)
	}
	return fmt.Errorf("%q: %w", rel, err)
}

// open opens rel beneath the workspace with flags.
func (w workspaceFS) open(rel string, flags int, mode uint32) (*os.File, error) {
	clean, err := sandbox.CleanWorkspacePath(rel)
	if err != nil {
		return nil, err
	}
	root, err := unix.Open(w.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	defer unix.Close(root)
	if clean == "" {
		clean = "."
	}
	fd, err := unix.Openat2(root, clean, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolveHow})
	if err != nil {
		return nil, pathError(rel, err)
	}
	return os.NewFile(uintptr(fd), path.Join("/workspace", clean)), nil
}

// list returns a folder's entries sorted by name, paths relative to the workspace.
func (w workspaceFS) list(rel string) ([]sandbox.FileInfo, error) {
	dir, err := w.open(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", rel, err)
	}
	clean, _ := sandbox.CleanWorkspacePath(rel)
	out := make([]sandbox.FileInfo, 0, len(entries))
	for _, e := range entries {
		// Stat through the folder's descriptor, not by path: the path the
		// runner sees is not the workspace's path in every image, and a path
		// could be swapped for a link meanwhile.
		var st unix.Stat_t
		if err := unix.Fstatat(int(dir.Fd()), e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // removed meanwhile
		}
		out = append(out, fileInfo(path.Join(clean, e.Name()), statInfo(e.Name(), st)))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

func fileInfo(rel string, info fs.FileInfo) sandbox.FileInfo {
	return sandbox.FileInfo{Path: rel, Type: fileKind(info.Mode()), Size: info.Size(), Mode: uint32(info.Mode().Perm()),
		ModifiedAt: info.ModTime().UTC().Truncate(time.Millisecond)}
}

// openFile opens a regular file for download.
func (w workspaceFS) openFile(rel string) (*os.File, sandbox.FileInfo, error) {
	f, err := w.open(rel, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, sandbox.FileInfo{}, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, sandbox.FileInfo{}, fmt.Errorf("stat %q: %w", rel, err)
	}
	if info.IsDir() {
		f.Close()
		return nil, sandbox.FileInfo{}, fmt.Errorf("%q: %w", rel, sandbox.ErrIsFolder)
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, sandbox.FileInfo{}, fmt.Errorf("%w: %q is not a regular file", sandbox.ErrInvalidPath, rel)
	}
	clean, _ := sandbox.CleanWorkspacePath(rel)
	return f, fileInfo(clean, info), nil
}

// archive writes the folder rel to out as a tar or zip stream, walking by
// descriptors: every entry is opened relative to its opened parent with
// O_NOFOLLOW, so a link is stored as a link and a folder swapped for a link
// mid-walk is not followed.
func (w workspaceFS) archive(rel, format string, out io.Writer) error {
	dir, err := w.open(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer dir.Close()
	var arc archiveWriter
	switch format {
	case sandbox.ArchiveTar:
		arc = tarArchive{tar.NewWriter(out)}
	case sandbox.ArchiveZip:
		arc = zipArchive{zip.NewWriter(out)}
	default:
		return fmt.Errorf("%w: archive format %q (tar or zip)", sandbox.ErrInvalidSpec, format)
	}
	if err := walkDir(dir, "", arc); err != nil {
		return err
	}
	return arc.Close()
}

// archiveWriter is the one thing tar and zip differ in.
type archiveWriter interface {
	add(name string, info fs.FileInfo, link string, body io.Reader) error
	Close() error
}

func walkDir(dir *os.File, prefix string, arc archiveWriter) error {
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return fmt.Errorf("read folder %q: %w", prefix, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		name := path.Join(prefix, e.Name())
		if err := walkEntry(dir, e.Name(), name, arc); err != nil {
			return err
		}
	}
	return nil
}

func walkEntry(parent *os.File, base, name string, arc archiveWriter) error {
	var st unix.Stat_t
	if err := unix.Fstatat(int(parent.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // removed meanwhile
		}
		return fmt.Errorf("stat %q: %w", name, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		target, err := readlinkat(parent, base)
		if err != nil {
			return fmt.Errorf("read link %q: %w", name, err)
		}
		return arc.add(name, statInfo(base, st), target, nil)
	case unix.S_IFDIR, unix.S_IFREG:
	default:
		return nil // devices, sockets and pipes are not workspace content
	}
	fd, err := unix.Openat(int(parent.Fd()), base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("open %q: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %q: %w", name, err)
	}
	if info.IsDir() {
		if err := arc.add(name+"/", info, "", nil); err != nil {
			return err
		}
		return walkDir(f, name, arc)
	}
	if !info.Mode().IsRegular() {
		return nil
	}
	// The header promises info.Size() bytes: a file that grows meanwhile is cut
	// there, one that shrinks fails the archive rather than corrupting it.
	return arc.add(name, info, "", io.LimitReader(f, info.Size()))
}

func readlinkat(dir *os.File, base string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(int(dir.Fd()), base, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// statInfo presents a raw stat as fs.FileInfo for archive headers.
type statFileInfo struct {
	name string
	st   unix.Stat_t
}

func statInfo(name string, st unix.Stat_t) fs.FileInfo { return statFileInfo{name, st} }

func (s statFileInfo) Name() string { return s.name }
func (s statFileInfo) Size() int64  { return s.st.Size }
func (s statFileInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFDIR:
		m |= fs.ModeDir
	}
	return m
}
func (s statFileInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s statFileInfo) IsDir() bool        { return s.st.Mode&unix.S_IFMT == unix.S_IFDIR }
func (s statFileInfo) Sys() any           { return nil }

type tarArchive struct{ w *tar.Writer }

func (a tarArchive) add(name string, info fs.FileInfo, link string, body io.Reader) error {
	hdr, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return fmt.Errorf("tar header %q: %w", name, err)
	}
	hdr.Name = name
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
	if err := a.w.WriteHeader(hdr); err != nil {
		return fmt.Errorf("tar header %q: %w", name, err)
	}
	if body != nil {
		if _, err := io.Copy(a.w, body); err != nil {
			return fmt.Errorf("tar %q: %w", name, err)
		}
	}
	return nil
}

func (a tarArchive) Close() error { return a.w.Close() }

type zipArchive struct{ w *zip.Writer }

func (a zipArchive) add(name string, info fs.FileInfo, link string, body io.Reader) error {
	hdr, err := zip.FileInfoHeader(info)
	if err != nil {
		return fmt.Errorf("zip header %q: %w", name, err)
	}
	hdr.Name = name
	if !info.IsDir() {
		hdr.Method = zip.Deflate
	}
	fw, err := a.w.CreateHeader(hdr)
	if err != nil {
		return fmt.Errorf("zip header %q: %w", name, err)
	}
	switch {
	case link != "":
		_, err = io.WriteString(fw, link) // zip stores a link's target as its content
	case body != nil:
		_, err = io.Copy(fw, body)
	}
	if err != nil {
		return fmt.Errorf("zip %q: %w", name, err)
	}
	return nil
}

func (a zipArchive) Close() error { return a.w.Close() }

// staged is an uploaded file written beside its target, waiting to be renamed.
type staged struct {
	parent *os.File
	tmp    string
	base   string
	rel    string
}

// upload writes every file of src to a temporary name beside its target and,
// once all arrived, renames them into place; on any failure it removes what it
// staged, so the workspace holds all of the upload or none of it.
func (w workspaceFS) upload(src sandbox.UploadSource) ([]sandbox.FileInfo, error) {
	var done []staged
	defer func() {
		for _, s := range done {
			if s.tmp != "" {
				_ = unix.Unlinkat(int(s.parent.Fd()), s.tmp, 0)
			}
			s.parent.Close()
		}
	}()
	for {
		f, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read upload: %w", err)
		}
		s, err := w.stage(f)
		if s.parent != nil {
			done = append(done, s)
		}
		if err != nil {
			return nil, err
		}
	}
	out := make([]sandbox.FileInfo, 0, len(done))
	for i := range done {
		s := &done[i]
		if err := unix.Renameat(int(s.parent.Fd()), s.tmp, int(s.parent.Fd()), s.base); err != nil {
			return nil, pathError(s.rel, err)
		}
		s.tmp = ""
		var st unix.Stat_t
		if err := unix.Fstatat(int(s.parent.Fd()), s.base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			out = append(out, fileInfo(s.rel, statInfo(s.base, st)))
		}
	}
	return out, nil
}

// stage writes one file beside its target. The returned staged value holds the
// opened parent (to be closed by the caller) even when writing failed.
func (w workspaceFS) stage(f sandbox.UploadFile) (staged, error) {
	rel, err := sandbox.CleanWorkspacePath(f.Path)
	if err != nil {
		return staged{}, err
	}
	if rel == "" {
		return staged{}, fmt.Errorf("%w: a file needs a name", sandbox.ErrInvalidPath)
	}
	parentRel, base := path.Split(rel)
	parent, err := w.mkdirAll(strings.TrimSuffix(parentRel, "/"))
	if err != nil {
		return staged{}, err
	}
	s := staged{parent: parent, base: base, rel: rel}
	mode := f.Mode & 0o777
	if mode == 0 {
		mode = 0o644
	}
	for attempt := 0; ; attempt++ {
		var raw [8]byte
		_, _ = rand.Read(raw[:])
		name := ".astrabox-upload-" + hex.EncodeToString(raw[:])
		fd, err := unix.Openat(int(parent.Fd()), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
		if errors.Is(err, unix.EEXIST) && attempt < 5 {
			continue
		}
		if err != nil {
			return s, pathError(rel, err)
		}
		s.tmp = name
		out := os.NewFile(uintptr(fd), name)
		_, err = io.Copy(out, f.Body)
		if err == nil {
			err = out.Chmod(fs.FileMode(mode)) // past the umask
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return s, fmt.Errorf("write %q: %w", rel, err)
		}
		return s, nil
	}
}

// mkdirAll opens the folder rel, creating what is missing, with every prefix
// resolved beneath the workspace.
func (w workspaceFS) mkdirAll(rel string) (*os.File, error) {
	dir, err := w.open(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err == nil || !errors.Is(err, sandbox.ErrNoFile) {
		return dir, err
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		prefix := strings.Join(parts[:i+1], "/")
		dir, err := w.open(prefix, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err == nil {
			if i == len(parts)-1 {
				return dir, nil
			}
			dir.Close()
			continue
		}
		if !errors.Is(err, sandbox.ErrNoFile) {
			return nil, err
		}
		parent, err := w.open(strings.Join(parts[:i], "/"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return nil, err
		}
		err = unix.Mkdirat(int(parent.Fd()), parts[i], 0o755)
		parent.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, pathError(prefix, err)
		}
		dir, err = w.open(prefix, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return nil, err
		}
		if i == len(parts)-1 {
			return dir, nil
		}
		dir.Close()
	}
	return nil, fmt.Errorf("%w: empty folder path", sandbox.ErrInvalidPath)
}
