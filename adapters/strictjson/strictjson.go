// Package strictjson decodes JSON that comes from outside the service — request bodies and
// payment callbacks — so that it has exactly one reading. encoding/json alone keeps the last of
// two equal keys and matches keys to struct fields ignoring case: {"qty":1,"qty":5} would
// order 5, and a callback with "amount":1,"Amount":200 would pay 200 while a provider or a log
// reading the first key sees 1. Decode refuses such bodies.
//
// Decode walks the tokens once (json.Decoder.Token, objects and arrays at any depth) and
// refuses, in document order: malformed JSON, two keys of one object that are equal or equal
// ignoring case, a key that is not exactly the JSON name of a field of the target struct
// (unknown, or matching only in another case), and data after the first value. Then it decodes
// with encoding/json (DisallowUnknownFields), which refuses wrong types.
//
// Keys are compared after unescaping ("q\u0074y" is "qty") and under Unicode simple case
// folding (strings.EqualFold), the folding encoding/json uses to match keys to fields: "K"
// (U+212A KELVIN SIGN) equals "k" and "ſ" (U+017F LATIN SMALL LETTER LONG S) equals "s", so
// "ſtatus" next to "status" is a duplicate and "ſtatus" alone is an unknown field. Invalid
// UTF-8 in a key reads as U+FFFD, as encoding/json reads it. (A struct with two fields whose
// names differ only in case could not receive both; request types have none.)
//
// Every refusal is a domain.ValidationError: Field names the key (a dotted path inside nested
// objects; `""` for an empty key at the top) or FieldBody, Reason is one of the Reason constants. Those texts are stable: the
// HTTP adapter shows them to clients.
//
// It imports the domain and the standard library only.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"cardshop/domain"
)

// FieldBody is the Field of a refusal about the body as a whole.
const FieldBody = "body"

// The Reason of each refusal.
const (
	ReasonNotJSON       = "not valid JSON"
	ReasonTrailing      = "trailing data after the JSON object"
	ReasonDuplicate     = "duplicate key"
	ReasonCaseDuplicate = "duplicate key (differs only in letter case)"
	ReasonUnknownField  = "unknown field"
	ReasonWrongType     = "has the wrong type"
)

// IsDuplicate reports whether err refuses a duplicate key (equal or equal ignoring case).
func IsDuplicate(err error) bool {
	var ve *domain.ValidationError
	return errors.As(err, &ve) && (ve.Reason == ReasonDuplicate || ve.Reason == ReasonCaseDuplicate)
}

// Decode decodes data, exactly one JSON value, into v, a non-nil pointer. An empty input is
// not valid JSON; a null leaves v as it is.
func Decode(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return errors.New("strictjson: Decode needs a non-nil pointer")
	}
	if err := check(data, rv.Type().Elem()); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return domain.Invalid(te.Field, ReasonWrongType)
		}
		// check has already refused every key encoding/json could call unknown; this is a
		// second line, with the same answer.
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return domain.Invalid(strings.Trim(name, `"`), ReasonUnknownField)
		}
		return domain.Invalid(FieldBody, ReasonNotJSON)
	}
	return nil
}

// frame is one open object or array of the walk.
type frame struct {
	object  bool
	wantKey bool                    // object: the next token is a key (or '}')
	fields  map[string]reflect.Type // object decoded into a struct: its fields by exact name
	elem    reflect.Type            // array or map: the element type; nil when not known
	keys    []string                // object: its keys so far, while there are few
	folded  map[string]string       // object with many keys: folded key → the key as sent
	path    string                  // dotted path of this value
	next    reflect.Type            // object: the type of the value after the current key
	nextAt  string                  // object: the path of that value
}

// check walks the tokens of data once, with t the type the value will be decoded into (nil
// when not known: then only keys are compared).
func check(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers stay text here: no float overflow, no conversion
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return domain.Invalid(FieldBody, ReasonNotJSON)
		}
		// The type and path of the value tok starts (when it is not a key or a closing delim).
		vt, at := t, ""
		if n := len(stack); n > 0 {
			top := &stack[n-1]
			if top.object {
				if key, ok := tok.(string); ok && top.wantKey {
					if err := top.key(key); err != nil {
						return err
					}
					continue
				}
				vt, at = top.next, top.nextAt
			} else {
				vt, at = top.elem, top.path
			}
		}
		switch tok {
		case json.Delim('{'):
			f := frame{object: true, wantKey: true, path: at}
			switch st := shape(vt); {
			case st == nil:
			case st.Kind() == reflect.Struct:
				f.fields = fieldsOf(st)
			case st.Kind() == reflect.Map:
				f.elem = st.Elem()
			}
			stack = append(stack, f)
			continue
		case json.Delim('['):
			f := frame{path: at}
			if st := shape(vt); st != nil && (st.Kind() == reflect.Slice || st.Kind() == reflect.Array) {
				f.elem = st.Elem()
			}
			stack = append(stack, f)
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value is complete.
		if len(stack) == 0 {
			break
		}
		if top := &stack[len(stack)-1]; top.object {
			top.wantKey = true
		}
	}
	// Only the end of input may follow (dec.More() would miss a stray '}' or ']').
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return domain.Invalid(FieldBody, ReasonTrailing)
	}
	return nil
}

// key records one key of the object f: refused if f has it already (exactly or ignoring case)
// or if f is a struct without a field of exactly that name.
func (f *frame) key(key string) error {
	f.wantKey = false
	f.nextAt = key
	if f.path != "" {
		f.nextAt = f.path + "." + key
	} else if key == "" {
		f.nextAt = `""` // a refusal always names its field
	}
	if prev, ok := f.seen(key); ok {
		if prev == key {
			return domain.Invalid(f.nextAt, ReasonDuplicate)
		}
		return domain.Invalid(f.nextAt, ReasonCaseDuplicate)
	}
	f.next = f.elem
	if f.fields != nil {
		ft, ok := f.fields[key]
		if !ok {
			return domain.Invalid(f.nextAt, ReasonUnknownField)
		}
		f.next = ft
	}
	return nil
}

// fewKeys is how many keys of one object are compared one by one (strings.EqualFold, no
// allocation) before they go into a map by folded key.
const fewKeys = 16

// seen records key and returns the earlier key of f equal to it ignoring case, if any.
func (f *frame) seen(key string) (string, bool) {
	if f.folded == nil {
		for _, prev := range f.keys {
			if strings.EqualFold(prev, key) {
				return prev, true
			}
		}
		if len(f.keys) < fewKeys {
			f.keys = append(f.keys, key)
			return "", false
		}
		f.folded = make(map[string]string, 2*fewKeys)
		for _, prev := range f.keys {
			f.folded[fold(prev)] = prev
		}
		f.keys = nil
	}
	k := fold(key)
	if prev, ok := f.folded[k]; ok {
		return prev, true
	}
	f.folded[k] = key
	return "", false
}

// fold maps s to one representative of its class under Unicode simple case folding: fold(a)
// == fold(b) exactly when strings.EqualFold(a, b). Each rune becomes the smallest rune of its
// folding orbit (for an ASCII letter, its upper case: 'K' < 'k' < U+212A).
func fold(s string) string {
	ascii, lower := true, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
		lower = lower || ('a' <= c && c <= 'z')
	}
	if ascii && !lower {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// shape is the type whose shape (struct fields, elements) the value decoded into t must have,
// pointers removed; nil when not known: no type, an interface, or a type that decodes itself.
func shape(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface ||
		reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil
	}
	return t
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// fieldsOf returns the fields of struct type t by their exact JSON name, with the fields of
// untagged embedded structs promoted (a shallower field wins). Where this is more lenient than
// encoding/json (two promoted fields of one name at one depth), DisallowUnknownFields in
// Decode still refuses.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := make(map[string]reflect.Type)
	seen := map[reflect.Type]bool{t: true}
	for level := []reflect.Type{t}; len(level) > 0; {
		var deeper []reflect.Type
		found := map[string]reflect.Type{}
		for _, st := range level {
			for i := 0; i < st.NumField(); i++ {
				sf := st.Field(i)
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if sf.Anonymous && name == "" {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if et.Kind() == reflect.Struct {
						if !seen[et] {
							seen[et] = true
							deeper = append(deeper, et)
						}
						continue
					}
				}
				if !sf.IsExported() {
					continue
				}
				if name == "" {
					name = sf.Name
				}
				if _, ok := m[name]; !ok {
					if _, ok := found[name]; !ok {
						found[name] = sf.Type
					}
				}
			}
		}
		for name, ft := range found {
			m[name] = ft
		}
		level = deeper
	}
	fieldCache.Store(t, m)
	return m
}
