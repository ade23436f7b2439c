package bootstrap_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// module is the module path of cardshop: an import path of the module is "cardshop" or starts
// with "cardshop/".
const module = "cardshop"

// folderRow is one row of the README's folder map: what the folder's code may import.
type folderRow struct {
	folder   string          // "adapters/paysig/": module-relative, ending in "/"
	project  map[string]bool // folders of the module it may import ("domain/", "lua/")
	modules  []string        // third-party module paths it may import, each with its subpackages
	readable string          // the cell as the README writes it, for messages
}

// TestImportsFollowTheFolderMap makes the README's folder map the rule of the module's
// arrows: every package has a row and every row a package; a package's code imports only the
// standard library, the module's folders its row names and the third-party modules its row
// names; its test files import any package of the module but bootstrap (bootstrap's own tests
// excepted) and any module of go.mod.
func TestImportsFollowTheFolderMap(t *testing.T) {
	rows := readFolderMap(t)
	pkgs := listPackages(t)

	for _, p := range pkgs {
		if _, ok := rows[p.folder]; !ok {
			t.Errorf("package %s (folder %s) has no row in the README's folder map", p.path, p.folder)
		}
	}
	exists := map[string]bool{}
	for _, p := range pkgs {
		exists[p.folder] = true
	}
	for folder, r := range rows {
		if !exists[folder] {
			t.Errorf("the README's folder map lists %s, which holds no package of the module", folder)
		}
		for dep := range r.project {
			if _, ok := rows[dep]; !ok {
				t.Errorf("the README's folder map lets %s import %s, which has no row of its own", folder, dep)
			}
		}
	}

	for _, p := range pkgs {
		r, ok := rows[p.folder]
		if !ok {
			continue
		}
		for _, imp := range p.imports {
			if msg := checkImport(r, p, imp); msg != "" {
				t.Errorf("%s imports %s: %s", p.path, imp, msg)
			}
		}
		for _, imp := range p.testImports {
			if isProject(imp) && folderOf(imp) == "bootstrap/" && p.folder != "bootstrap/" {
				t.Errorf("a test of %s imports %s: only bootstrap's own tests may import bootstrap", p.path, imp)
			}
		}
	}
}

// checkImport says why p's code may not import imp by row r, or "" if it may.
func checkImport(r folderRow, p listedPackage, imp string) string {
	switch {
	case isProject(imp):
		if dep := folderOf(imp); dep != p.folder && !r.project[dep] {
			return "its row in the README's folder map allows " + r.readable
		}
	case isStandard(imp):
	default:
		if !slices.ContainsFunc(r.modules, func(m string) bool { return imp == m || strings.HasPrefix(imp, m+"/") }) {
			return "its row in the README's folder map allows " + r.readable
		}
	}
	return ""
}

// readFolderMap parses the table under "## Folder map" in README.md: the first column holds
// the folder in backquotes, the third what it may import, each module folder ("domain",
// "adapters/paysig") or third-party module path ("github.com/redis/go-redis/v9") in backquotes;
// text outside backquotes is for the reader.
func readFolderMap(t *testing.T) map[string]folderRow {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Folder map\n")
	if !ok {
		t.Fatal(`README.md has no "## Folder map" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	code := regexp.MustCompile("`([^`]+)`")
	rows := map[string]folderRow{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 3 {
			t.Fatalf("folder map row %q: want 3 cells (folder, what it is, may import), got %d", line, len(cells))
		}
		folders := code.FindAllStringSubmatch(cells[0], -1)
		if len(folders) != 1 || !strings.HasSuffix(folders[0][1], "/") || folders[0][0] != cells[0] {
			t.Fatalf("folder map row %q: the first cell must be one folder in backquotes, ending in /", line)
		}
		r := folderRow{folder: folders[0][1], project: map[string]bool{}, readable: cells[2]}
		if _, dup := rows[r.folder]; dup {
			t.Errorf("the README's folder map lists %s twice", r.folder)
		}
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			if name := m[1]; isThirdParty(name) {
				if !strings.Contains(name, "/") {
					t.Fatalf("folder map row %s: %q is neither a folder of the module nor a module path", r.folder, name)
				}
				r.modules = append(r.modules, name)
			} else {
				r.project[strings.TrimSuffix(name, "/")+"/"] = true
			}
		}
		rows[r.folder] = r
	}
	if len(rows) == 0 {
		t.Fatal("the README's folder map has no rows")
	}
	return rows
}

// listedPackage is one package of the module as go list describes it.
type listedPackage struct {
	path        string   // "cardshop/adapters/paysig"
	folder      string   // "adapters/paysig/"
	imports     []string // of its code
	testImports []string // of its test files, in and outside the package
}

func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	// go test puts GOROOT/bin first on the PATH of the test binary.
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the imports: %v", err)
	}
	format := `{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}`
	out, err := exec.Command(gobin, "list", "-f", format, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var pkgs []listedPackage
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 3 || !isProject(f[0]) {
			t.Fatalf("go list printed %q, want path|imports|test imports", line)
		}
		pkgs = append(pkgs, listedPackage{path: f[0], folder: folderOf(f[0]), imports: strings.Fields(f[1]), testImports: strings.Fields(f[2])})
	}
	if len(pkgs) < 2 {
		t.Fatalf("go list found %d packages in %s", len(pkgs), module)
	}
	return pkgs
}

func isProject(path string) bool { return path == module || strings.HasPrefix(path, module+"/") }

// isThirdParty tells a module path ("github.com/…", "go.uber.org/fx") from a folder of the
// module: its first element has a dot.
func isThirdParty(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return strings.Contains(first, ".")
}

// isStandard tells a package of the standard library, the way the go command does: outside
// the module, with no dot in its first element.
func isStandard(path string) bool { return !isProject(path) && !isThirdParty(path) }

// folderOf is the module-relative folder of a package of the module, ending in "/".
func folderOf(path string) string { return strings.TrimPrefix(path, module+"/") + "/" }

// lab lists the folders of test and measurement equipment: nothing in them ships in the
// cardshop binary.
var lab = []string{"adapters/lab/", "adapters/porttest/", "cmd/loadcheck/"}

func inLab(folder string) bool {
	return slices.ContainsFunc(lab, func(l string) bool { return strings.HasPrefix(folder, l) })
}

// TestProductImportsNoLab keeps the equipment out of the product: the code of a package
// outside the lab imports no package of adapters/lab, and the cardshop binary depends on no
// package of the lab at all.
func TestProductImportsNoLab(t *testing.T) {
	for _, p := range listPackages(t) {
		if inLab(p.folder) {
			continue
		}
		for _, imp := range p.imports {
			if isProject(imp) && strings.HasPrefix(folderOf(imp), "adapters/lab/") {
				t.Errorf("%s imports %s: only the lab and tests may import adapters/lab", p.path, imp)
			}
		}
	}

	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the dependencies: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}}", module+"/cmd/cardshop").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"/domain") {
		t.Fatalf("go list -deps cmd/cardshop printed no %s/domain: %q", module, deps)
	}
	for _, d := range deps {
		if isProject(d) && inLab(folderOf(d)) {
			t.Errorf("the cardshop binary depends on %s, test and measurement equipment", d)
		}
	}
}
