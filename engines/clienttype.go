package engines

import (
	"errors"
	"fmt"
	"reflect"
)

var (
	runtimeClientType        = reflect.TypeFor[RuntimeClient]()
	permissionModeSetterType = reflect.TypeFor[PermissionModeSetter]()
	childRunStopperType      = reflect.TypeFor[ChildRunStopper]()
	serverInfoProviderType   = reflect.TypeFor[ServerInfoProvider]()
	runtimeStateSaverType    = reflect.TypeFor[RuntimeStateSaver]()
)

// CheckClientType checks that a declared runtime client type serves the whole runtime
// contract and the optional interfaces the capabilities declare: PermissionModeSetter
// when the engine has permission modes, ServerInfoProvider for supports_server_info and
// ChildRunStopper for supports_child_run_stop, RuntimeStateSaver for runtime_state_store. Each missing or mistyped method is named.
func CheckClientType(t reflect.Type, caps EngineRuntimeCapabilities) error {
	if t == nil {
		return errors.New("no runtime client type declared")
	}
	if t.Kind() == reflect.Interface {
		return fmt.Errorf("%s is an interface; declare the concrete client type", t)
	}
	var errs []error
	errs = append(errs, implementsErr(t, runtimeClientType, "RuntimeClient"))
	if len(caps.PermissionModes) > 0 {
		errs = append(errs, implementsErr(t, permissionModeSetterType, "PermissionModeSetter (the engine declares permission modes)"))
	}
	if caps.SupportsServerInfo {
		errs = append(errs, implementsErr(t, serverInfoProviderType, "ServerInfoProvider (the engine declares supports_server_info)"))
	}
	if caps.SupportsChildRunStop {
		errs = append(errs, implementsErr(t, childRunStopperType, "ChildRunStopper (the engine declares supports_child_run_stop)"))
	}
	if caps.RuntimeStateStore {
		errs = append(errs, implementsErr(t, runtimeStateSaverType, "RuntimeStateSaver (the engine declares runtime_state_store)"))
	}
	return errors.Join(errs...)
}

// MismatchedOptionalMethods names methods of t that carry an optional member's name
// with another signature: such a method would silently never be called.
func MismatchedOptionalMethods(t reflect.Type) []string {
	if t == nil {
		return nil
	}
	var out []string
	for _, iface := range []reflect.Type{permissionModeSetterType, childRunStopperType, serverInfoProviderType, runtimeStateSaverType} {
		for i := range iface.NumMethod() {
			want := iface.Method(i)
			if got, ok := t.MethodByName(want.Name); ok && !sameSignature(t, got, want) {
				out = append(out, fmt.Sprintf("%s has signature %s, want %s", want.Name, methodSig(t, got), want.Type))
			}
		}
	}
	return out
}

func implementsErr(t, iface reflect.Type, what string) error {
	if t.Implements(iface) {
		return nil
	}
	if t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(iface) {
		return fmt.Errorf("%s does not implement %s, but *%s does: declare the pointer type", t, what, t)
	}
	var missing []string
	for i := range iface.NumMethod() {
		want := iface.Method(i)
		got, ok := t.MethodByName(want.Name)
		switch {
		case !ok:
			missing = append(missing, fmt.Sprintf("missing %s%s", want.Name, trimFunc(want.Type.String())))
		case !sameSignature(t, got, want):
			missing = append(missing, fmt.Sprintf("%s has signature %s, want %s", want.Name, methodSig(t, got), want.Type))
		}
	}
	return fmt.Errorf("%s does not implement %s: %v", t, what, missing)
}

// sameSignature compares a concrete method (whose type includes the receiver unless t
// is an interface) with an interface method.
func sameSignature(t reflect.Type, got, want reflect.Method) bool {
	return methodSig(t, got) == want.Type.String()
}

func methodSig(t reflect.Type, m reflect.Method) string {
	ft := m.Type
	if t.Kind() == reflect.Interface {
		return ft.String()
	}
	in := make([]reflect.Type, 0, ft.NumIn())
	for i := 1; i < ft.NumIn(); i++ {
		in = append(in, ft.In(i))
	}
	out := make([]reflect.Type, 0, ft.NumOut())
	for i := range ft.NumOut() {
		out = append(out, ft.Out(i))
	}
	return reflect.FuncOf(in, out, ft.IsVariadic()).String()
}

func trimFunc(s string) string {
	if len(s) > 4 && s[:4] == "func" {
		return s[4:]
	}
	return s
}
