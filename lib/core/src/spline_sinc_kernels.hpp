// The interpolation policies beyond ONNX (B-splines, windowed sincs), in the form of
// sampling_policies.hpp's, and the one mapping from every Interpolation to its policy type. These
// kinds take the reference path only; their weights are computed in double (as ITK does) and
// rounded to the coordinate type once.
#pragma once

#include "sampling_policies.hpp"

#include <cmath>
#include <numbers>
#include <utility>

namespace gridwarp::detail {

// The centred B-spline of degree Order on one piece of its support, at a = |x|: piece p covers
// p <= a < p + 1 (odd orders) or p - 1/2 <= a < p + 1/2 (even orders; piece 0 is a < 1/2).
template <int Order>
double bspline_piece(int piece, double a) {
    const double a2 = a * a;
    if constexpr (Order == 0) {
        return 1.0;
    } else if constexpr (Order == 1) {
        return 1.0 - a;
    } else if constexpr (Order == 2) {
        return piece == 0 ? 0.75 - a2 : 0.5 * (1.5 - a) * (1.5 - a);
    } else if constexpr (Order == 3) {
        if (piece == 0) return 2.0 / 3.0 - a2 + 0.5 * a2 * a;
        return (2.0 - a) * (2.0 - a) * (2.0 - a) * (1.0 / 6.0);
    } else if constexpr (Order == 4) {
        if (piece == 0) return 115.0 / 192.0 - 0.625 * a2 + 0.25 * a2 * a2;
        if (piece == 1) return 55.0 / 96.0 + a * (5.0 / 24.0 + a * (-1.25 + a * (5.0 / 6.0 - a / 6.0)));
        const double r = 2.5 - a;
        return r * r * r * r * (1.0 / 24.0);
    } else {
        static_assert(Order == 5);
        if (piece == 0) return 0.55 - 0.5 * a2 + 0.25 * a2 * a2 - a2 * a2 * a * (1.0 / 12.0);
        if (piece == 1) return 17.0 / 40.0 + a * (0.625 + a * (-1.75 + a * (1.25 + a * (-0.375 + a / 24.0))));
        const double r = 3.0 - a;
        return r * r * r * r * r * (1.0 / 120.0);
    }
}

// ITK's BSplineInterpolateImageFunction along one axis: Order + 1 taps from floor(u) - Order/2
// (odd orders) or floor(u + 0.5) - Order/2 (even orders), weighted by the basis at their distance.
// Each tap's distance lies on a piece of the support known from its place among the taps.
template <int Order>
struct BSplineTaps {
    static constexpr int taps = Order + 1;
    // first_tap(u) = floor(tap_origin(u)) - taps_before.
    static constexpr int taps_before = Order / 2;
    template <class C> static C tap_origin(C u) { return Order % 2 == 1 ? u : u + C(0.5); }
    template <class C> static C first_tap(C u) { return std::floor(tap_origin(u)) - C(taps_before); }
    template <class C> static void weights(C u, C first, C* w) {
        const double offset = static_cast<double>(u) - static_cast<double>(first);
        // Unrolled at compile time, so that each tap's piece is a constant and its branch folds away.
        [&]<int... k>(std::integer_sequence<int, k...>) {
            ((w[k] = static_cast<C>(bspline_piece<Order>(piece_of(k), std::fabs(offset - k)))), ...);
        }(std::make_integer_sequence<int, taps>{});
    }
    // weights() for N points at once, w[k * N + b] the weight of tap k of point b: the same
    // operations lane by lane, in loops the compiler vectorises.
    template <int N, class C> static void weights_of_lanes(const C* u, const C* first, C* w) {
        double offset[N];
        for (int b = 0; b < N; ++b) offset[b] = static_cast<double>(u[b]) - static_cast<double>(first[b]);
        [&]<int... k>(std::integer_sequence<int, k...>) {
            ((weights_of_tap<k, N>(offset, w + k * N)), ...);
        }(std::make_integer_sequence<int, taps>{});
    }
    template <int k, int N, class C> static void weights_of_tap(const double* offset, C* w) {
        for (int b = 0; b < N; ++b) w[b] = static_cast<C>(bspline_piece<Order>(piece_of(k), std::fabs(offset[b] - k)));
    }
    static constexpr int piece_of(int k) { return k <= Order / 2 ? Order / 2 - k : k - Order / 2 - (Order % 2); }
};

// ITK's window functions of radius m = kSincRadius, at the distances x = fraction - j of the taps
// j = -(m - 1) .. m: each from one sine and cosine of the fraction by the angle-difference
// identities (window(x) as Function::*WindowFunction<m> defines it, to rounding).
struct SincTapAngles {
    double cos_third[2 * kSincRadius], sin_third[2 * kSincRadius];  // of pi j / m
    double cos_sixth[2 * kSincRadius], sin_sixth[2 * kSincRadius];  // of pi j / 2m
    SincTapAngles() {
        for (int k = 0; k < 2 * kSincRadius; ++k) {
            const double j = k - (kSincRadius - 1);
            cos_third[k] = std::cos(std::numbers::pi * j / kSincRadius);
            sin_third[k] = std::sin(std::numbers::pi * j / kSincRadius);
            cos_sixth[k] = std::cos(std::numbers::pi * j / (2 * kSincRadius));
            sin_sixth[k] = std::sin(std::numbers::pi * j / (2 * kSincRadius));
        }
    }
};
inline const SincTapAngles kSincTapAngles;

struct LanczosWindow {  // sin(pi x / m) / (pi x / m)
    static void at_taps(double fraction, double* window) {
        const double angle = std::numbers::pi * fraction / kSincRadius, s = std::sin(angle), c = std::cos(angle);
        for (int k = 0; k < 2 * kSincRadius; ++k) {
            const double x = fraction - (k - (kSincRadius - 1));
            window[k] = (s * kSincTapAngles.cos_third[k] - c * kSincTapAngles.sin_third[k]) / (x * (std::numbers::pi / kSincRadius));
        }
    }
};
struct HammingWindow {  // 0.54 + 0.46 cos(pi x / m)
    static void at_taps(double fraction, double* window) {
        const double angle = std::numbers::pi * fraction / kSincRadius, s = std::sin(angle), c = std::cos(angle);
        for (int k = 0; k < 2 * kSincRadius; ++k) {
            window[k] = 0.54 + 0.46 * (c * kSincTapAngles.cos_third[k] + s * kSincTapAngles.sin_third[k]);
        }
    }
};
struct CosineWindow {  // cos(pi x / 2m)
    static void at_taps(double fraction, double* window) {
        const double angle = std::numbers::pi * fraction / (2 * kSincRadius), s = std::sin(angle), c = std::cos(angle);
        for (int k = 0; k < 2 * kSincRadius; ++k) window[k] = c * kSincTapAngles.cos_sixth[k] + s * kSincTapAngles.sin_sixth[k];
    }
};
struct WelchWindow {  // 1 - x^2 / m^2
    static void at_taps(double fraction, double* window) {
        for (int k = 0; k < 2 * kSincRadius; ++k) {
            const double x = fraction - (k - (kSincRadius - 1));
            window[k] = 1.0 - x * (1.0 / (kSincRadius * kSincRadius)) * x;
        }
    }
};
struct BlackmanWindow {  // 0.42 + 0.5 cos(pi x / m) + 0.08 cos(2 pi x / m)
    static void at_taps(double fraction, double* window) {
        const double angle = std::numbers::pi * fraction / kSincRadius, s = std::sin(angle), c = std::cos(angle);
        for (int k = 0; k < 2 * kSincRadius; ++k) {
            const double cosine = c * kSincTapAngles.cos_third[k] + s * kSincTapAngles.sin_third[k];
            window[k] = 0.42 + 0.5 * cosine + 0.08 * (2.0 * cosine * cosine - 1.0);
        }
    }
};

// ITK's WindowedSincInterpolateImageFunction along one axis: 2m taps from floor(u) - m + 1, each
// weighted window(x) * sin(pi x) / (pi x) at its distance x, not normalised; where u is a whole
// number the weights are exactly 1 at floor(u) and 0 elsewhere.
template <class Window>
struct WindowedSincTaps {
    static constexpr int taps = 2 * kSincRadius;
    static constexpr int taps_before = kSincRadius - 1;
    template <class C> static C tap_origin(C u) { return u; }
    template <class C> static C first_tap(C u) { return std::floor(tap_origin(u)) - C(taps_before); }
    template <class C> static void weights(C u, C first, C* w) {
        const double fraction = static_cast<double>(u) - (static_cast<double>(first) + (kSincRadius - 1));
        if (fraction == 0.0) {
            for (int k = 0; k < taps; ++k) w[k] = C(k == kSincRadius - 1 ? 1 : 0);
            return;
        }
        double window[taps];
        Window::at_taps(fraction, window);
        // sin(pi (fraction - j)) = (-1)^j sin(pi fraction).
        const double sine = std::sin(std::numbers::pi * fraction);
        for (int k = 0; k < taps; ++k) {
            const int j = k - (kSincRadius - 1);
            const double x = fraction - j;
            w[k] = static_cast<C>(window[k] * ((j % 2 == 0 ? sine : -sine) / (std::numbers::pi * x)));
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
