package trainer

import (
	"math"
	"testing"
)

// cosVectors: x and CPython's math.cos(x) (glibc), as bit patterns: random arguments and the
// kind schedules produce (π × num_cycles × 2 × progress).
var cosVectors = []struct{ x, cos uint64 }{
	{0x0000000000000000, 0x3ff0000000000000},
	{0x01a56e1fc2f8f359, 0x3ff0000000000000},
	{0x3e45798ee2308c3a, 0x3ff0000000000000},
	{0x3fe0000000000000, 0x3fec1528065b7d50},
	{0x3fe921fb54442d18, 0x3fe6a09e667f3bcd},
	{0x3ff921fb54442d18, 0x3c91a62633145c07},
	{0x400921fb54442d18, 0xbff0000000000000},
	{0x401921fb54442d18, 0x3ff0000000000000},
	{0x4008000000000000, 0xbfefae04be85e5d2},
	{0xc008000000000000, 0xbfefae04be85e5d2},
	{0x4059000000000000, 0x3feb981dbf665fdf},
	{0x412e848000000000, 0x3fedf9df9906d32c},
	{0x40c81cd6c8b43958, 0x3fe6b94c3bbe24b8},
	{0x3fb52a170397ba2f, 0x3fefe40529a542aa},
	{0x3fee28c731eb6950, 0x3fe2cf2304755a5e},
	{0xc00eba1db8c517d8, 0xbfe87d5cc5dd960a},
	{0xc027fe7474016f98, 0x3feaf38e20e2d91e},
	{0xc029b220e3b28705, 0x3feebd7a6d0aff55},
	{0xc024202068aae4f4, 0xbfe9b4b085a1930f},
	{0x4024ca4a36dda412, 0xbfe214c646b2f858},
	{0xc023e86d66b5ae3c, 0xbfeb9f80823827a2},
	{0xc012b58d45623d52, 0xbfa1f6ab3f507f97},
	{0x401d7d4826027fe4, 0x3fdda58e7662505c},
	{0x3ff8b8ff272fd8e0, 0x3f9a3e4ef0df8dae},
	{0x403188faa01e9dfe, 0x3fd039a0bb56f354},
	{0xbfdb74c3802b9240, 0x3fed19a7279109d3},
	{0xc009134f2b1c68e8, 0xbfefffca2dfd2ad3},
	{0x40121d5473c4a508, 0xbfc7632e8740064d},
	{0xc026aa243612e87e, 0x3fd5255d5a070eaa},
	{0x4030147915f10b6c, 0xbfedcfa864a30024},
	{0xc01429c9bf8db1a4, 0x3fd4a49ea00b52cb},
	{0xc011e6f046c528f6, 0xbfce0927c16df089},
	{0x401d2dd3a4407718, 0x3fe0fa1fe340785b},
	{0xc02bd16067629a50, 0x3fccf5d47799f071},
	{0x4019b0dc6b947c24, 0x3fefb0629d8ba0f7},
	{0x402bff53ffab4d6c, 0x3fc1ab329e98627f},
	{0xc019ca79e6573778, 0x3fef9159a14879f9},
	{0x4031dfd63b9559b4, 0x3fe1f3c7418850f5},
	{0x3ff260db5630b100, 0x3fda38e404199397},
	{0x4025f537f4e0c610, 0xbf9107b641041eeb},
	{0xbff3d0a476b09040, 0x3fd4e1a89f1cb924},
	{0xc00f29255e4b3fc0, 0xbfe7566cc99c1ad8},
	{0xc02272b43e6ba4a0, 0xbfef5b7cf6f84ded},
	{0xc033b1f92adfbc80, 0x3fe53949d9fefedc},
	{0xc027b2e7a45feb66, 0x3fe81f4135b087f1},
	{0x403395324caa69ba, 0x3fe7c6b8955d1264},
	{0x3ff5f55ae6771ec0, 0x3fc93a732cf6fb67},
	{0xbff843b7d681f240, 0x3fabc4f24a6b8694},
	{0x4030027b13fd8ad0, 0xbfee8dec5f93780e},
	{0x4010e1a7654106b8, 0xbfde3bf9d2946952},
	{0x403311879a41afd0, 0x3fef3c7a9d1e8553},
	{0xc016cbc7716acdfc, 0x3feab1774ff406f6},
	{0xc026bbf04c79ca7a, 0x3fd73b83546ecb7e},
	{0x4030d4a02d936288, 0xbfdbbbc490405bf6},
	{0xc02b2292328660f6, 0x3fe142381781ca9a},
	{0x402758dd706aca18, 0x3fe412427670144c},
	{0x400e889a74fe6ed0, 0xbfe8faff568d3c8b},
	{0x403350c626e35c4e, 0x3fec96a0d4a54f4c},
	{0x4031c1a4fd841714, 0x3fdd6bd30e7b235e},
	{0x4019a5dfaf853cc8, 0x3fefbc2487fdb559},
	{0xc032847bbf737739, 0x3fee408a50fadf8a},
	{0xc033115e5e24e15f, 0x3fef3d98c62402c3},
	{0xbff0d096794a7370, 0x3fdfcb0edfd2b2aa},
	{0x402992cd4e30b2f8, 0x3fef39ec116dafe6},
	{0xc030c0eb89510be4, 0xbfe00b1c5911613f},
	{0xc007dd9326b82b68, 0xbfef9970fff12432},
	{0xc0308f2aa34912be, 0xbfe516b16dbbb715},
	{0xc01e6e4eefa6f570, 0x3fcf341743c2f1bf},
	{0xc033c5f5d4183dc4, 0x3fe34a8eb38fcf17},
	{0xc01b3f9535489f1c, 0x3feba0a2efe0db83},
	{0x3fedf46500da5420, 0x3fe2f96ad09c5be9},
	{0xc027efbafd001391, 0x3fea71b551fd43f2},
	{0x4026fa2e51bd01a0, 0x3fde4af071bcf58a},
	{0xc031c8b477cc3eb2, 0x3fdefa338da2e28f},
	{0xc02715ceb991fd5e, 0x3fe0a5033330708e},
	{0xc02364d4ee8b982d, 0xbfeed2799d4c9a33},
	{0xc00eb2c6e6fea140, 0xbfe89037d1369077},
	{0x40251a8529437552, 0xbfdb7a882ba203f1},
	{0xc0176400c12c4688, 0x3fed03430b0bc136},
	{0x401f3327c185daa0, 0x3faba5c23181338d},
	{0x4030e3525f477256, 0xbfd860e27f2823cf},
	{0xc02d869dc09d4d34, 0xbfe2be2239392b78},
	{0x402d1d466d2f02c0, 0xbfda18e968b738f3},
	{0x400fe4ce1f285dc0, 0xbfe53c7f9fe82d4c},
	{0x4023c717a5812060, 0xbfec9d9565ca4fbd},
	{0x4011491886d31054, 0xbfd86440fd5036c2},
	{0xc00d581bab067b88, 0xbfebaadc11f6b2c1},
	{0xc0302402f5680b8c, 0xbfed0cf9e52183bb},
	{0xc02c81cb390a4e9b, 0xbfbdb70d6816a574},
	{0xc02a11b6b416ba90, 0x3fec8e4bc3f93eb9},
	{0xc029c9d1ebe6b89c, 0x3fee4bc6b471ee19},
	{0xc02c5becf0c2379e, 0xbfa5b0887718b174},
	{0xc02764c6873218f2, 0x3fe4a546edacaaf5},
	{0x400382501cc3a670, 0xbfe869ebd107fdcf},
	{0x4025a5371cfdc826, 0xbfc6050507b50da5},
	{0x4027d655e656ccaa, 0x3fe984ac8e9dc4d8},
	{0x402bb0a6089373d8, 0x3fd26ec9d15805e3},
	{0xc02e9f78e36bdce0, 0xbfed847833379628},
	{0x4029c9b24f9df568, 0x3fee4c697d2b5de6},
	{0xc0291fb44d377d28, 0x3fefffeb40bdce01},
	{0xc0311abb6b7e6c06, 0xbfc633ca52b7f9f8},
	{0xc020fb9c8de375bb, 0xbfe30b6f5adeab97},
	{0x400b6beec94d5930, 0xbfeeb2fd486aba3a},
	{0xc03217c7e9501551, 0x3fe744a9cd197b37},
	{0xc026b1b8e43af224, 0x3fd609b962c8dc38},
	{0xc01024d46d43d1d8, 0xbfe408402628ab25},
	{0x4029ca141a1fac1c, 0x3fee4a718594a7c9},
	{0xc01018294c47fcc4, 0xbfe456e38ceba200},
	{0xc00b7fc72773d420, 0xbfee9c37c35c729e},
	{0xc014a4cc29500952, 0x3fdbc104acf5095d},
	{0xc0304b1e1218080d, 0xbfeaabab12326891},
	{0x402e5d8f5e603ca0, 0xbfebafcb43474078},
	{0x4030ebe3e9dd6f32, 0xbfd66270e35227b5},
	{0x4021bb98de924836, 0xbfeb23c41475e662},
	{0xc0103a2ae49564b0, 0xbfe38207cc9e499f},
	{0xc001edaaf6caa6d0, 0xbfe3e0bce2a2d235},
	{0xc01e2c4996eda8f8, 0x3fd39180d8c8c1e1},
	{0x4018b18604855acc, 0x3fefcea5d934b239},
	{0x401889c66e663ad4, 0x3fefa5abc3526663},
	{0xc01e4b8365e2910c, 0x3fd1b38fc165a0f3},
	{0x402df03bc6e0fa24, 0xbfe7a86508703801},
	{0x4021a873f323ab0c, 0xbfea7ca99cd44ffa},
	{0xc02682fdac5c2d60, 0x3fd0783d8ce92802},
	{0x4028bdeded1d8ee0, 0x3fef64155da913ca},
	{0x401be331f63b793c, 0x3fe8b4e62d8a10c1},
	{0xc02405b8fc2a19ae, 0xbfeaa76f2a5d4cd4},
	{0xc0204a34539e662a, 0xbfd25bef8d8bcbb3},
	{0x40241ed91b974674, 0xbfe9c0da222f139c},
	{0xc030cb7fa4965f10, 0xbfddc595beb2b60e},
	{0xc003e6205727d7a0, 0xbfe96481f9bc1ba4},
	{0x40328d614e89cd28, 0x3fee98a6104129ac},
	{0xc02380c4654da0b8, 0xbfee4ea49d8d80a8},
	{0x3fc021a1bb8a0000, 0x3fefbf07df4d8890},
	{0x403049c9306c8dd2, 0xbfeac31f20af1c99},
	{0x402df7aa6b34b9a0, 0xbfe7f7d3ddd4292a},
	{0x400679c6a196d506, 0xbfee404d68a67003},
	{0x3ff8e4d27dceb8d5, 0x3f8e9420c3127866},
	{0x40129b69db7cc879, 0xbfaf04746a3dcbef},
	{0x3fff3c8de4086aec, 0xbfd7d3c92b80a7f9},
	{0x4028130680bdf904, 0x3feb9f60d45a7778},
	{0x4002b53c512ff217, 0xbfe6392f290ca0c8},
	{0x40091faaa25a71cc, 0xbfeffffea8f22d3b},
	{0x400889b2bacae4d5, 0xbfefe95d18ffcca7},
	{0x40077118256a9b06, 0xbfef49ae476634bd},
	{0x401c698c39ae65ba, 0x3fe5d56c42fa1ddb},
	{0x400c51e29ef3c738, 0xbfed7e74efae16e5},
	{0x3ffcbd04f8b0606e, 0xbfcc99f5d28a3209},
	{0x3f9402b3afd7dcb7, 0x3feffe6f97284eb0},
	{0x3ff9b4fac5c50f14, 0xbfa25eebb5bee8d1},
	{0x40132ec90a7fac1e, 0x3fb54cd32a382928},
	{0x400903693306190a, 0xbfefff165c4f3260},
	{0x3feaf4365a5f6098, 0x3fe54dbe39378a4e},
	{0x3ff3f11ee8b5e7ae, 0x3fd466b029afce9b},
	{0x3ffda43a8ebe4f8d, 0xbfd1cc1fba396943},
	{0x3ffc73e5e6d1b236, 0xbfca5ea4ba4ccf11},
	{0x3ffa70d5f8887028, 0xbfb4e7b304031044},
	{0x40756da3c03eed61, 0xbfed3bc3aeff8019},
	{0x3fe680d71185eb56, 0x3fe868857adcc211},
	{0x40207cd8d95cd743, 0xbfd852e3cd938de1},
	{0x3f7e1452f97f318a, 0x3fefffc773bfaed9},
	{0x3ff732b35e82f8bb, 0x3fbee1335d3c5cff},
	{0x3ff0716f21202264, 0x3fe08994a6e36f90},
	{0x401b2e08a58e3812, 0x3febe66f63aef0f6},
	{0x3fffc8a6c21910db, 0xbfd9d83855bd721e},
	{0x4004fbed28cf38d4, 0xbfebcaf0cc5a84bf},
	{0x40054fb72c81ab7a, 0xbfec6b0f74324766},
	{0x4008a5ad78d217a6, 0xbfeff0ea4e7b48bc},
	{0x401a7757e03c0ee4, 0x3fee3d0377b40e75},
	{0x403e4ea003bb9fca, 0x3fdc86fa2b2883b3},
	{0x3ff12772a73ab931, 0x3fde9bb693571188},
	{0x3fda204f8b7c7b87, 0x3fed5ed8f608256f},
	{0x3ffb574f89baa298, 0xbfc19c4947daddfa},
	{0x401177d3af6a2c44, 0xbfd5aaba1c3c663b},
	{0x4000a52397aeaa7b, 0xbfdf3bfa9eebee41},
	{0x4006234b88baff48, 0xbfedc8a416eed0f5},
}

func TestPyCosMatchesGlibc(t *testing.T) {
	goDiffers := 0
	for _, v := range cosVectors {
		x, want := math.Float64frombits(v.x), math.Float64frombits(v.cos)
		if got := pyCos(x); math.Float64bits(got) != v.cos {
			t.Errorf("pyCos(%v) = %v, glibc gives %v", x, got, want)
		}
		if math.Cos(x) != want {
			goDiffers++
		}
	}
	// Documents why pyCos exists: math.Cos is off in the last bit for some of these.
	t.Logf("math.Cos differs from glibc on %d of %d arguments", goDiffers, len(cosVectors))
	if !math.IsNaN(pyCos(math.Inf(1))) || pyCos(1e300) != math.Cos(1e300) {
		t.Error("non-finite or huge arguments")
	}
}

// powVectors: x, y and CPython's x ** y.
var powVectors = []struct{ x, y, pow uint64 }{
	{0x3feccccccccccccd, 0x4000000000000000, 0x3fe9eb851eb851ec},
	{0x3fbf9add3739635f, 0x4008000000000000, 0x3f5ed4529e9f9604},
	{0x3fe6666666666666, 0x4014000000000000, 0x3fc5835158b827f8},
	{0x3ff000001ad7f29b, 0x4050000000000000, 0x3ff00006b5fe0969},
	{0x3fd3333333333333, 0xc000000000000000, 0x402638e38e38e38f},
	{0x3feff7ced916872b, 0x401c000000000000, 0x3fefc6d3e72229bc},
	{0x3fe0000000000000, 0x3fe0000000000000, 0x3fe6a09e667f3bcd},
	{0x3fe999999999999a, 0x3ff8000000000000, 0x3fe6e5b7d16657e2},
}

func TestPyPow(t *testing.T) {
	for _, v := range powVectors {
		x, y, want := math.Float64frombits(v.x), math.Float64frombits(v.y), math.Float64frombits(v.pow)
		got := pyPow(x, y)
		if y == math.Trunc(y) && math.Float64bits(got) != v.pow {
			t.Errorf("pyPow(%v, %v) = %v, Python gives %v", x, y, got, want)
		}
		if math.Abs(got-want) > 2e-16*math.Abs(want) {
			t.Errorf("pyPow(%v, %v) = %v, Python gives %v", x, y, got, want)
		}
	}
}
