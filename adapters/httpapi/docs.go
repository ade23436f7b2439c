package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"
)

// docsCSP lets the docs page use its own inline style and nothing else: it loads nothing.
const docsCSP = "default-src 'none'; style-src 'unsafe-inline'"

// docsPage is the docs page, rendered from the embedded description on first use.
var docsPage = sync.OnceValues(func() ([]byte, error) { return renderDocs(openAPISpec) })

// serveDocs answers GET /docs with the description as a small HTML page.
func serveDocs(c *fiber.Ctx) error {
	page, err := docsPage()
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentSecurityPolicy, docsCSP)
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return c.Send(page)
}

// specDoc is the part of an OpenAPI document the docs page shows.
type specDoc struct {
	OpenAPI string `json:"openapi"`
	Info    struct {
		Title       string `json:"title"`
		Version     string `json:"version"`
		Description string `json:"description"`
	} `json:"info"`
	Tags []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"tags"`
	// Paths maps a path to its path item, whose method keys hold operations (other keys, such
	// as path-level parameters, are skipped).
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Responses  map[string]specResponse `json:"responses"`
		Parameters map[string]specParam    `json:"parameters"`
	} `json:"components"`
}

type specOperation struct {
	OperationID string                `json:"operationId"`
	Tags        []string              `json:"tags"`
	Summary     string                `json:"summary"`
	Description string                `json:"description"`
	Security    []map[string][]string `json:"security"`
	Parameters  []specParam           `json:"parameters"`
	RequestBody *struct {
		Required bool `json:"required"`
		Content  map[string]struct {
			Schema struct {
				Ref string `json:"$ref"`
			} `json:"schema"`
		} `json:"content"`
	} `json:"requestBody"`
	Responses map[string]specResponse `json:"responses"`
}

type specParam struct {
	Ref         string `json:"$ref"`
	Name        string `json:"name"`
	In          string `json:"in"`
	Required    bool   `json:"required"`
	Description string `json:"description"`
}

type specResponse struct {
	Ref         string `json:"$ref"`
	Description string `json:"description"`
}

// docsView is what the page template renders.
type docsView struct {
	Title, Version, OpenAPI string
	Intro                   []template.HTML
	Groups                  []docsGroup
}

type docsGroup struct {
	Name        string
	Description template.HTML
	Operations  []docsOperation
}

type docsOperation struct {
	ID, Method, Path string
	Summary          template.HTML
	Description      template.HTML
	Auth             string
	Params           []docsParam
	Body             template.HTML
	Responses        []docsResponse
}

type docsParam struct {
	Name, In    string
	Required    bool
	Description template.HTML
}

type docsResponse struct {
	Status      string
	Description template.HTML
}

// docsMethods are the methods the page shows, in the order it shows them on one path.
var docsMethods = []string{"get", "put", "post", "patch", "delete"}

// authNames names the security schemes for people.
var authNames = map[string]string{"buyerToken": "buyer token", "adminToken": "admin token",
	"paymentSignature": "payment signature (X-Cardshop-Signature)"}

// renderDocs renders the docs page from an OpenAPI document.
func renderDocs(spec []byte) ([]byte, error) {
	var doc specDoc
	if err := json.Unmarshal(spec, &doc); err != nil {
		return nil, fmt.Errorf("docs: parse openapi.json: %w", err)
	}
	v := docsView{Title: doc.Info.Title, Version: doc.Info.Version, OpenAPI: doc.OpenAPI}
	for _, p := range strings.Split(doc.Info.Description, "\n\n") {
		v.Intro = append(v.Intro, inlineCode(p))
	}
	byTag := map[string][]docsOperation{}
	for _, path := range slices.Sorted(maps.Keys(doc.Paths)) {
		for _, method := range docsMethods {
			raw, ok := doc.Paths[path][method]
			if !ok {
				continue
			}
			var op specOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				return nil, fmt.Errorf("docs: %s %s: %w", method, path, err)
			}
			tag := "other"
			if len(op.Tags) > 0 {
				tag = op.Tags[0]
			}
			byTag[tag] = append(byTag[tag], docsOperation{ID: op.OperationID, Method: strings.ToUpper(method),
				Path: path, Summary: inlineCode(op.Summary), Description: inlineCode(op.Description),
				Auth: authOf(op.Security), Params: paramsOf(op.Parameters, doc.Components.Parameters),
				Body: bodyOf(op), Responses: responsesOf(op.Responses, doc.Components.Responses)})
		}
	}
	for _, t := range doc.Tags {
		if ops := byTag[t.Name]; len(ops) > 0 {
			v.Groups = append(v.Groups, docsGroup{Name: t.Name, Description: inlineCode(t.Description), Operations: ops})
			delete(byTag, t.Name)
		}
	}
	for _, tag := range slices.Sorted(maps.Keys(byTag)) { // tags the document does not list
		v.Groups = append(v.Groups, docsGroup{Name: tag, Operations: byTag[tag]})
	}
	var buf bytes.Buffer
	if err := docsTemplate.Execute(&buf, v); err != nil {
		return nil, fmt.Errorf("docs: render: %w", err)
	}
	return buf.Bytes(), nil
}

func authOf(security []map[string][]string) string {
	var names []string
	for _, req := range security {
		var all []string
		for scheme := range req {
			name := authNames[scheme]
			if name == "" {
				name = scheme
			}
			all = append(all, name)
		}
		slices.Sort(all)
		names = append(names, strings.Join(all, " and "))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, " or ")
}

func paramsOf(ps []specParam, shared map[string]specParam) []docsParam {
	out := make([]docsParam, 0, len(ps))
	for _, p := range ps {
		if name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
			p = shared[name]
		}
		out = append(out, docsParam{Name: p.Name, In: p.In, Required: p.Required, Description: inlineCode(p.Description)})
	}
	return out
}

// bodyOf says what request body an operation takes: its media types and their schemas.
func bodyOf(op specOperation) template.HTML {
	if op.RequestBody == nil {
		return ""
	}
	var kinds []string
	for _, mt := range slices.Sorted(maps.Keys(op.RequestBody.Content)) {
		k := "<code>" + template.HTMLEscapeString(mt) + "</code>"
		if name, ok := strings.CutPrefix(op.RequestBody.Content[mt].Schema.Ref, "#/components/schemas/"); ok {
			k += " (" + template.HTMLEscapeString(name) + " in /openapi.json)"
		}
		kinds = append(kinds, k)
	}
	body := strings.Join(kinds, " or ")
	if !op.RequestBody.Required {
		body += ", optional"
	}
	return template.HTML(body) //nolint:gosec // G203: escaped above
}

func responsesOf(rs map[string]specResponse, shared map[string]specResponse) []docsResponse {
	out := make([]docsResponse, 0, len(rs))
	for status, r := range rs {
		if name, ok := strings.CutPrefix(r.Ref, "#/components/responses/"); ok {
			r = shared[name]
		}
		out = append(out, docsResponse{Status: status, Description: inlineCode(r.Description)})
	}
	slices.SortFunc(out, func(a, b docsResponse) int { return strings.Compare(a.Status, b.Status) })
	return out
}

// inlineCode escapes s for HTML and shows its `quoted` parts as code.
func inlineCode(s string) template.HTML {
	parts := strings.Split(template.HTMLEscapeString(s), "`")
	var b strings.Builder
	for i, p := range parts {
		switch {
		case i%2 == 0:
			b.WriteString(p)
		case i == len(parts)-1: // an unpaired backquote
			b.WriteString("`" + p)
		default:
			b.WriteString("<code>" + p + "</code>")
		}
	}
	return template.HTML(b.String()) //nolint:gosec // G203: escaped above; only <code> was added
}

var docsTemplate = template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} HTTP API</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:62rem;margin:2rem auto;padding:0 1rem;color:#1d1d1d}
h1 small{font-weight:normal;color:#666;font-size:.6em}
h2{margin-top:2.5rem;border-bottom:1px solid #ccc;text-transform:capitalize}
h3{margin:1.8rem 0 .3rem;font-size:1.05rem}
.method{display:inline-block;min-width:3.6rem;font-family:monospace}
code{background:#f2f2f2;padding:0 .2em;border-radius:3px}
table{border-collapse:collapse;margin:.4rem 0}
td{border-top:1px solid #e4e4e4;padding:.2rem .8rem .2rem 0;vertical-align:top}
td:first-child{font-family:monospace}
.auth{color:#555}
nav a{margin-right:.8rem}
</style>
</head>
<body>
<h1>{{.Title}} HTTP API <small>version {{.Version}}</small></h1>
{{range .Intro}}<p>{{.}}</p>
{{end}}<p>The same description for machines: <a href="/openapi.json">/openapi.json</a> (OpenAPI {{.OpenAPI}}).</p>
<nav>{{range .Groups}}<a href="#{{.Name}}">{{.Name}}</a>{{end}}</nav>
{{range .Groups}}
<h2 id="{{.Name}}">{{.Name}}</h2>
{{with .Description}}<p>{{.}}</p>{{end}}
{{range .Operations}}<section id="{{.ID}}">
<h3><span class="method">{{.Method}}</span> <code>{{.Path}}</code></h3>
<p>{{.Summary}}</p>
{{with .Description}}<p>{{.}}</p>{{end}}
<p class="auth">Authentication: {{.Auth}}</p>
{{with .Params}}<ul>
{{range .}}<li><code>{{.Name}}</code> ({{.In}}{{if .Required}}, required{{end}}){{with .Description}}: {{.}}{{end}}</li>
{{end}}</ul>
{{end}}{{with .Body}}<p>Body: {{.}}</p>
{{end}}<table>
{{range .Responses}}<tr><td>{{.Status}}</td><td>{{.Description}}</td></tr>
{{end}}</table>
</section>
{{end}}{{end}}
</body>
</html>
`))
