// The interpolation policies beyond ONNX (B-splines, windowed sincs), in the form of
// sampling_policies.hpp's, and the one mapping from every Interpolation to its policy type. These
// kinds take the reference path only; their weights are computed in double (as ITK does) and
// rounded to the coordinate type once.
#pragma once

#include "sampling_policies.hpp"

#include <cmath>
#include <numbers>

namespace gridwarp::detail {

// The centred B-spline of degree Order at x (Unser's basis; its support is |x| < (Order + 1) / 2).
template <int Order>
double bspline_basis(double x) {
    const double a = std::fabs(x);
    if constexpr (Order == 0) {
        return a < 0.5 ? 1.0 : 0.0;
    } else if constexpr (Order == 1) {
        return a < 1.0 ? 1.0 - a : 0.0;
    } else if constexpr (Order == 2) {
        if (a < 0.5) return 0.75 - a * a;
        if (a < 1.5) return 0.5 * (1.5 - a) * (1.5 - a);
        return 0.0;
    } else if constexpr (Order == 3) {
        if (a < 1.0) return 2.0 / 3.0 - a * a + 0.5 * a * a * a;
        if (a < 2.0) return (2.0 - a) * (2.0 - a) * (2.0 - a) / 6.0;
        return 0.0;
    } else if constexpr (Order == 4) {
        const double a2 = a * a;
        if (a < 0.5) return 115.0 / 192.0 - 0.625 * a2 + 0.25 * a2 * a2;
        if (a < 1.5) return 55.0 / 96.0 + a * (5.0 / 24.0 + a * (-1.25 + a * (5.0 / 6.0 - a / 6.0)));
        if (a < 2.5) {
            const double r = 2.5 - a;
            return r * r * r * r / 24.0;
        }
        return 0.0;
    } else {
        static_assert(Order == 5);
        const double a2 = a * a;
        if (a < 1.0) return 0.55 - 0.5 * a2 + 0.25 * a2 * a2 - a2 * a2 * a / 12.0;
        if (a < 2.0) return 17.0 / 40.0 + a * (0.625 + a * (-1.75 + a * (1.25 + a * (-0.375 + a / 24.0))));
        if (a < 3.0) {
            const double r = 3.0 - a;
            return r * r * r * r * r / 120.0;
        }
        return 0.0;
    }
}

// ITK's BSplineInterpolateImageFunction along one axis: Order + 1 taps from floor(u) - Order/2
// (odd orders) or floor(u + 0.5) - Order/2 (even orders), weighted by the basis at their distance.
template <int Order>
struct BSplineTaps {
    static constexpr int taps = Order + 1;
    template <class C> static C first_tap(C u) {
        return std::floor(Order % 2 == 1 ? u : u + C(0.5)) - C(Order / 2);
    }
    template <class C> static void weights(C u, C first, C* w) {
        const double offset = static_cast<double>(u) - static_cast<double>(first);
        for (int k = 0; k < taps; ++k) w[k] = static_cast<C>(bspline_basis<Order>(offset - k));
    }
};

// ITK's window functions of radius m = kSincRadius, as Function::*WindowFunction<m> computes them.
struct LanczosWindow {
    static double at(double x) {
        if (x == 0.0) return 1.0;
        const double z = x * (std::numbers::pi / kSincRadius);
        return std::sin(z) / z;
    }
};
struct HammingWindow {
    static double at(double x) { return 0.54 + 0.46 * std::cos(x * (std::numbers::pi / kSincRadius)); }
};
struct CosineWindow {
    static double at(double x) { return std::cos(x * (std::numbers::pi / (2 * kSincRadius))); }
};
struct WelchWindow {
    static double at(double x) { return 1.0 - x * (1.0 / (kSincRadius * kSincRadius)) * x; }
};
struct BlackmanWindow {
    static double at(double x) {
        return 0.42 + 0.5 * std::cos(x * (std::numbers::pi / kSincRadius)) + 0.08 * std::cos(x * (2 * std::numbers::pi / kSincRadius));
    }
};

// ITK's WindowedSincInterpolateImageFunction along one axis: 2m taps from floor(u) - m + 1, each
// weighted window(x) * sin(pi x) / (pi x) at its distance x, not normalised; where u is a whole
// number the weights are exactly 1 at floor(u) and 0 elsewhere.
template <class Window>
struct WindowedSincTaps {
    static constexpr int taps = 2 * kSincRadius;
    template <class C> static C first_tap(C u) { return std::floor(u) - C(kSincRadius - 1); }
    template <class C> static void weights(C u, C first, C* w) {
        const double fraction = static_cast<double>(u) - (static_cast<double>(first) + (kSincRadius - 1));
        if (fraction == 0.0) {
            for (int k = 0; k < taps; ++k) w[k] = C(k == kSincRadius - 1 ? 1 : 0);
            return;
        }
        // sin(pi (fraction - j)) = (-1)^j sin(pi fraction): one sine per axis.
        const double sine = std::sin(std::numbers::pi * fraction);
        for (int k = 0; k < taps; ++k) {
            const int j = k - (kSincRadius - 1);
            const double x = fraction - j;
            const double sinc = (j % 2 == 0 ? sine : -sine) / (std::numbers::pi * x);
            w[k] = static_cast<C>(Window::at(x) * sinc);
        }
    }
};

// Every kind as its policy type: calls fn with a type_tag of the policy (the reference path).
template <class Fn>
decltype(auto) visit_any_interpolation(Interpolation mode, int spline_order, Fn&& fn) {
    switch (mode) {
        case Interpolation::BSpline:
            switch (spline_order) {
                case 0: return fn(type_tag<BSplineTaps<0>>{});
                case 1: return fn(type_tag<BSplineTaps<1>>{});
                case 2: return fn(type_tag<BSplineTaps<2>>{});
                case 4: return fn(type_tag<BSplineTaps<4>>{});
                case 5: return fn(type_tag<BSplineTaps<5>>{});
                default: return fn(type_tag<BSplineTaps<3>>{});
            }
        case Interpolation::LanczosSinc: return fn(type_tag<WindowedSincTaps<LanczosWindow>>{});
        case Interpolation::HammingSinc: return fn(type_tag<WindowedSincTaps<HammingWindow>>{});
        case Interpolation::CosineSinc: return fn(type_tag<WindowedSincTaps<CosineWindow>>{});
        case Interpolation::WelchSinc: return fn(type_tag<WindowedSincTaps<WelchWindow>>{});
        case Interpolation::BlackmanSinc: return fn(type_tag<WindowedSincTaps<BlackmanWindow>>{});
        default: return visit_interpolation(mode, fn);
    }
}

}  // namespace gridwarp::detail
