package safetensors

import "strconv"

// parseFast parses the header layout that writers produce — strings without escapes or control
// characters, integers without sign, fraction or exponent, every tensor with exactly dtype,
// shape and data_offsets — allocating only what the Header keeps (names, shapes, the table and
// its index): about 150 bytes a tensor where the decoder path makes ten times that in garbage.
// At anything else, valid or not, it returns ok=false and parseHeader runs the decoder path,
// which accepts or names the problem; on every header parseFast accepts the two paths agree
// (FuzzParse checks it). members (countMembers) sizes the table.
func parseFast(js []byte, members int) (*Header, bool) {
	p := fastParser{b: js}
	h := &Header{HeaderSize: int64(len(js)), index: make(map[string]int, members),
		Tensors: make([]TensorInfo, 0, members)}
	p.ws()
	if !p.eat('{') {
		return nil, false
	}
	p.ws()
	if p.eat('}') {
		p.ws()
		return h, p.i == len(p.b)
	}
	sawMetadata := false
	for {
		p.ws()
		key, ok := p.str()
		if !ok {
			return nil, false
		}
		p.ws()
		if !p.eat(':') {
			return nil, false
		}
		p.ws()
		switch {
		case key == metadataKey:
			if sawMetadata {
				return nil, false
			}
			sawMetadata = true
			if h.Metadata, ok = p.metadata(); !ok {
				return nil, false
			}
		case key == "":
			return nil, false
		default:
			if _, dup := h.index[key]; dup || len(h.Tensors) == MaxTensors {
				return nil, false
			}
			info, ok := p.tensor(key)
			if !ok || checkTensorInfo(info, "") != nil {
				return nil, false
			}
			h.index[key] = len(h.Tensors)
			h.Tensors = append(h.Tensors, info)
		}
		p.ws()
		if p.eat(',') {
			continue
		}
		if !p.eat('}') {
			return nil, false
		}
		p.ws()
		return h, p.i == len(p.b)
	}
}

type fastParser struct {
	b []byte
	i int
}

// ws skips JSON white space.
func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string without escapes or control characters (the header is valid UTF-8).
func (p *fastParser) str() (string, bool) {
	if !p.eat('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := string(p.b[start:p.i])
			p.i++
			return s, true
		case c == '\\' || c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// uint reads a non-negative JSON integer that fits in an int64.
func (p *fastParser) uint() (int64, bool) {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	digits := p.b[start:p.i]
	if len(digits) == 0 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	v, err := strconv.ParseInt(string(digits), 10, 64)
	return v, err == nil
}

// uints reads an array of uint; want < 0 accepts any length.
func (p *fastParser) uints(want int) ([]int64, bool) {
	if !p.eat('[') {
		return nil, false
	}
	var out []int64
	p.ws()
	if p.eat(']') {
		return out, want < 0 || want == 0
	}
	for {
		p.ws()
		v, ok := p.uint()
		if !ok {
			return nil, false
		}
		out = append(out, v)
		p.ws()
		if p.eat(',') {
			continue
		}
		if !p.eat(']') {
			return nil, false
		}
		return out, want < 0 || len(out) == want
	}
}

// tensor reads a tensor entry with exactly the fields dtype, shape and data_offsets.
func (p *fastParser) tensor(name string) (TensorInfo, bool) {
	info := TensorInfo{Name: name}
	if !p.eat('{') {
		return info, false
	}
	seen := 0
	for {
		p.ws()
		field, ok := p.str()
		if !ok {
			return info, false
		}
		p.ws()
		if !p.eat(':') {
			return info, false
		}
		p.ws()
		switch field {
		case "dtype":
			s, ok := p.str()
			if !ok || seen&1 != 0 {
				return info, false
			}
			d, err := ParseDType(s)
			if err != nil {
				return info, false
			}
			info.DType, seen = d, seen|1
		case "shape":
			dims, ok := p.uints(-1)
			if !ok || seen&2 != 0 {
				return info, false
			}
			info.Shape = make([]int, len(dims))
			for i, d := range dims {
				if int64(int(d)) != d {
					return info, false
				}
				info.Shape[i] = int(d)
			}
			seen |= 2
		case "data_offsets":
			offs, ok := p.uints(2)
			if !ok || seen&4 != 0 {
				return info, false
			}
			info.Begin, info.End, seen = offs[0], offs[1], seen|4
		default:
			return info, false
		}
		p.ws()
		if p.eat(',') {
			continue
		}
		return info, p.eat('}') && seen == 7
	}
}

// metadata reads the "__metadata__" value: null, or an object of strings with distinct keys.
func (p *fastParser) metadata() (map[string]string, bool) {
	if len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return nil, true
	}
	if !p.eat('{') {
		return nil, false
	}
	md := map[string]string{}
	p.ws()
	if p.eat('}') {
		return md, true
	}
	for {
		p.ws()
		k, ok := p.str()
		if !ok {
			return nil, false
		}
		if _, dup := md[k]; dup {
			return nil, false
		}
		p.ws()
		if !p.eat(':') {
			return nil, false
		}
		p.ws()
		v, ok := p.str()
		if !ok {
			return nil, false
		}
		md[k] = v
		p.ws()
		if p.eat(',') {
			continue
		}
		return md, p.eat('}')
	}
}
