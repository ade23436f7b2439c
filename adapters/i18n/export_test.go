package i18n

import "io/fs"

func LoadFS(fsys fs.FS) (*Catalogue, error) { return load(fsys) }
