// Package customization owns ResourceInterpreterCustomizations: it compiles their Lua when
// they are admitted, reports Ready and Stalled conditions (naming the operation and the Lua
// line of a script that does not compile), puts compiled versions in force in the shared
// interpret.Registry, and ships the bundled customizations for popular CRDs.
//
// It must not run scripts against workloads or write anything but customization status and
// events; what the scripts mean is the interpret package's business.
package customization
