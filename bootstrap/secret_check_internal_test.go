package bootstrap

import (
	"fmt"
	"reflect"
	"testing"

	"cardshop/domain"
)

// Every Secret of the configuration is judged with the real adapters, but the RSA private
// keys (PEM or a file), whose adapters refuse a short key: a secret added to Config and not
// to realSecrets fails here.
func TestEverySecretSettingIsJudged(t *testing.T) {
	notJudged := map[string]bool{"AlipayPrivateKey": true, "WechatPrivateKey": true}
	var c Config
	v := reflect.ValueOf(&c).Elem()
	want := map[domain.Secret]string{}
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Type != reflect.TypeOf(domain.Secret("")) || notJudged[f.Name] {
			continue
		}
		s := domain.Secret(fmt.Sprintf("value-of-%s", f.Name))
		v.Field(i).Set(reflect.ValueOf(s))
		want[s] = f.Name
	}
	for _, s := range realSecrets(c) {
		if _, known := EnvDefault(s.name); !known {
			t.Errorf("realSecrets names %s, which the service does not read", s.name)
		}
		delete(want, s.value)
	}
	for _, field := range want {
		t.Errorf("Config.%s is a Secret that realSecrets does not judge", field)
	}
}
