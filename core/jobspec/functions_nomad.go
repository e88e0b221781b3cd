package jobspec

import (
	"fmt"
	"math/big"
	"net/netip"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/gocty"
	"golang.org/x/crypto/bcrypt"
)

// Nomad 1.6's function library differs from Terraform's, whose
// documentation it shares: the functions here are Nomad's own (the
// cidr family, bcrypt), and notNomad lists the functions a
// Terraform user may expect that Nomad's parser does not have. Those are
// refused with a portable spelling, so that a job file drover parses
// parses with Nomad's CLI too.

// notNomad maps each function Nomad 1.6's parser lacks to what to write
// instead.
var notNomad = map[string]string{
	"regex":       `use regex_replace, or can(regex_replace(…)) to test a pattern`,
	"regexall":    `use regex_replace`,
	"setsubtract": `use a for expression: [for x in a : x if !contains(b, x)]`,
	"timestamp":   `a job file cannot depend on when it is parsed; pass the time as a variable (-var)`,
	"tobool":      `use convert(value, bool)`,
	"tonumber":    `use convert(value, number)`,
	"tostring":    `use convert(value, string) or "${value}"`,
	"tolist":      `use convert(value, list(any))`,
	"toset":       `use convert(value, set(any))`,
	"tomap":       `use convert(value, map(any))`,
}

// notNomadFunc refuses a function Nomad 1.6's parser does not have.
func notNomadFunc(name, instead string) function.Function {
	return function.New(&function.Spec{
		VarParam: &function.Parameter{Name: "args", Type: cty.DynamicPseudoType, AllowNull: true, AllowDynamicType: true, AllowUnknown: true},
		Type: func([]cty.Value) (cty.Type, error) {
			return cty.NilType, fmt.Errorf("%s() is not one of Nomad's job file functions, so a file using it would not parse with Nomad's CLI: %s", name, instead)
		},
	})
}

// parsePrefix parses an IPv4 or IPv6 CIDR prefix argument.
func parsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR expression: %v", err)
	}
	return p, nil
}

// addrInt is a's address as an integer; intAddr its inverse for a's
// family.
func addrInt(a netip.Addr) *big.Int { return new(big.Int).SetBytes(a.AsSlice()) }

func intAddr(n *big.Int, v6 bool) (netip.Addr, bool) {
	size := 4
	if v6 {
		size = 16
	}
	if n.Sign() < 0 || n.BitLen() > size*8 {
		return netip.Addr{}, false
	}
	b := make([]byte, size)
	n.FillBytes(b)
	a, ok := netip.AddrFromSlice(b)
	return a, ok
}

// cidrHost is the address numbered num in prefix (negative: from the
// end), as Nomad's cidrhost gives it.
func cidrHost(prefix string, num int64) (string, error) {
	p, err := parsePrefix(prefix)
	if err != nil {
		return "", err
	}
	p = p.Masked()
	hostBits := p.Addr().BitLen() - p.Bits()
	size := new(big.Int).Lsh(big.NewInt(1), uint(hostBits))
	n := big.NewInt(num)
	if num < 0 {
		n.Add(n, size)
	}
	if n.Sign() < 0 || n.Cmp(size) >= 0 {
		return "", fmt.Errorf("prefix of %d bits has no host number %d", p.Bits(), num)
	}
	a, ok := intAddr(n.Add(n, addrInt(p.Addr())), p.Addr().Is6())
	if !ok {
		return "", fmt.Errorf("host number %d is outside the address space", num)
	}
	return a.String(), nil
}

// cidrSubnet is subnet num of prefix extended by newbits bits.
func cidrSubnet(prefix string, newbits, num int64) (string, error) {
	p, err := parsePrefix(prefix)
	if err != nil {
		return "", err
	}
	p = p.Masked()
	bits := p.Bits() + int(newbits)
	if newbits < 0 || bits > p.Addr().BitLen() {
		return "", fmt.Errorf("cannot extend a prefix of %d bits by %d bits", p.Bits(), newbits)
	}
	if num < 0 || big.NewInt(num).BitLen() > int(newbits) {
		return "", fmt.Errorf("prefix extension of %d bits has no subnet number %d", newbits, num)
	}
	n := new(big.Int).Lsh(big.NewInt(num), uint(p.Addr().BitLen()-bits))
	a, ok := intAddr(n.Or(n, addrInt(p.Addr())), p.Addr().Is6())
	if !ok {
		return "", fmt.Errorf("subnet number %d is outside the address space", num)
	}
	return netip.PrefixFrom(a, bits).String(), nil
}

// cidrSubnets is consecutive subnets of prefix, one per newbits, each
// aligned on its own size, as Nomad's cidrsubnets allocates them.
func cidrSubnets(prefix string, newbits []int64) ([]string, error) {
	p, err := parsePrefix(prefix)
	if err != nil {
		return nil, err
	}
	p = p.Masked()
	total := p.Addr().BitLen()
	next := addrInt(p.Addr())
	end := new(big.Int).Add(addrInt(p.Addr()), new(big.Int).Lsh(big.NewInt(1), uint(total-p.Bits())))
	out := make([]string, 0, len(newbits))
	for i, nb := range newbits {
		bits := p.Bits() + int(nb)
		if nb < 1 || bits > total {
			return nil, fmt.Errorf("argument %d: cannot extend a prefix of %d bits by %d bits", i+2, p.Bits(), nb)
		}
		size := new(big.Int).Lsh(big.NewInt(1), uint(total-bits))
		// Align next on the subnet's size.
		if r := new(big.Int).Mod(next, size); r.Sign() != 0 {
			next.Add(next, new(big.Int).Sub(size, r))
		}
		if new(big.Int).Add(next, size).Cmp(end) > 0 {
			return nil, fmt.Errorf("argument %d: not enough remaining address space for a subnet with a prefix of %d bits", i+2, bits)
		}
		a, _ := intAddr(next, p.Addr().Is6())
		out = append(out, netip.PrefixFrom(a, bits).String())
		next.Add(next, size)
	}
	return out, nil
}

// cidrNetmask is an IPv4 prefix's netmask in dotted form.
func cidrNetmask(prefix string) (string, error) {
	p, err := parsePrefix(prefix)
	if err != nil {
		return "", err
	}
	if !p.Addr().Is4() {
		return "", fmt.Errorf("only IPv4 prefixes have a netmask")
	}
	m := uint32(0xffffffff) << (32 - p.Bits())
	if p.Bits() == 0 {
		m = 0
	}
	return netip.AddrFrom4([4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}).String(), nil
}

// Bounds of bcrypt, whose cost is the point: a job file is parsed by the
// agent for whoever calls /v1/jobs/parse.
const (
	maxBcryptCost  = 12
	maxBcryptCalls = 16
)

// nomadFunctions are Nomad's own functions missing from go-cty's
// library; bcrypts counts the bcrypt calls of the parse.
func nomadFunctions(bcrypts *int) map[string]function.Function {
	str := func(name string) function.Parameter { return function.Parameter{Name: name, Type: cty.String} }
	num := func(name string) function.Parameter { return function.Parameter{Name: name, Type: cty.Number} }
	toInt := func(v cty.Value) (int64, error) {
		var i int64
		err := gocty.FromCtyValue(v, &i)
		return i, err
	}
	return map[string]function.Function{
		"cidrhost": function.New(&function.Spec{
			Params: []function.Parameter{str("prefix"), num("hostnum")},
			Type:   function.StaticReturnType(cty.String),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				n, err := toInt(args[1])
				if err != nil {
					return cty.NilVal, function.NewArgError(1, err)
				}
				s, err := cidrHost(args[0].AsString(), n)
				return cty.StringVal(s), err
			},
		}),
		"cidrnetmask": function.New(&function.Spec{
			Params: []function.Parameter{str("prefix")},
			Type:   function.StaticReturnType(cty.String),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				s, err := cidrNetmask(args[0].AsString())
				return cty.StringVal(s), err
			},
		}),
		"cidrsubnet": function.New(&function.Spec{
			Params: []function.Parameter{str("prefix"), num("newbits"), num("netnum")},
			Type:   function.StaticReturnType(cty.String),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				nb, err := toInt(args[1])
				if err != nil {
					return cty.NilVal, function.NewArgError(1, err)
				}
				n, err := toInt(args[2])
				if err != nil {
					return cty.NilVal, function.NewArgError(2, err)
				}
				s, err := cidrSubnet(args[0].AsString(), nb, n)
				return cty.StringVal(s), err
			},
		}),
		"cidrsubnets": function.New(&function.Spec{
			Params:   []function.Parameter{str("prefix")},
			VarParam: &function.Parameter{Name: "newbits", Type: cty.Number},
			Type:     function.StaticReturnType(cty.List(cty.String)),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				if len(args) > 256 {
					return cty.NilVal, fmt.Errorf("at most 255 subnets at a time")
				}
				nbs := make([]int64, 0, len(args)-1)
				for i, a := range args[1:] {
					n, err := toInt(a)
					if err != nil {
						return cty.NilVal, function.NewArgError(i+1, err)
					}
					nbs = append(nbs, n)
				}
				subnets, err := cidrSubnets(args[0].AsString(), nbs)
				if err != nil {
					return cty.NilVal, err
				}
				if len(subnets) == 0 {
					return cty.ListValEmpty(cty.String), nil
				}
				vals := make([]cty.Value, len(subnets))
				for i, s := range subnets {
					vals[i] = cty.StringVal(s)
				}
				return cty.ListVal(vals), nil
			},
		}),
		"bcrypt": function.New(&function.Spec{
			Params:   []function.Parameter{str("str")},
			VarParam: &function.Parameter{Name: "cost", Type: cty.Number},
			Type:     function.StaticReturnType(cty.String),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				cost := int64(bcrypt.DefaultCost)
				switch len(args) {
				case 1:
				case 2:
					c, err := toInt(args[1])
					if err != nil || c < int64(bcrypt.MinCost) || c > maxBcryptCost {
						return cty.NilVal, function.NewArgErrorf(1, "cost must be a whole number from %d to %d", bcrypt.MinCost, maxBcryptCost)
					}
					cost = c
				default:
					return cty.NilVal, fmt.Errorf("bcrypt takes a string and at most one cost")
				}
				if *bcrypts++; *bcrypts > maxBcryptCalls {
					return cty.NilVal, fmt.Errorf("a job file may call bcrypt at most %d times", maxBcryptCalls)
				}
				h, err := bcrypt.GenerateFromPassword([]byte(args[0].AsString()), int(cost))
				if err != nil {
					return cty.NilVal, err
				}
				return cty.StringVal(string(h)), nil
			},
		}),
	}
}
